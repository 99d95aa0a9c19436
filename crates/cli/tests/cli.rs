//! End-to-end tests of the `nexthop` binary: FIB directories on disk,
//! error reporting, atomic updates and the demo.

mod fixture;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use predicates::prelude::*;

use fixture::{nexthop, stdout, Fixture};

/// The FIB commands on the fixture's `fib` directory.
impl Fixture {
    fn fib(&self) -> PathBuf {
        self.path("fib")
    }

    fn build(&self, key_type: &str, routes: &str, extra: &[&str]) -> assert_cmd::assert::Assert {
        let r = self.file("routes.txt", routes);
        nexthop()
            .args(["fib", "build", "--key-type", key_type, "--routes"])
            .arg(&r)
            .arg("--out")
            .arg(self.fib())
            .args(extra)
            .assert()
    }

    fn lookup(&self, names: &[&str]) -> String {
        let out = nexthop()
            .args(["fib", "lookup", "--fib"])
            .arg(self.fib())
            .args(names)
            .assert()
            .success();
        stdout(&out)
    }

    fn update(&self, changes: &str) -> assert_cmd::assert::Assert {
        let c = self.file("changes.txt", changes);
        nexthop()
            .args(["fib", "update", "--fib"])
            .arg(self.fib())
            .arg("--changes")
            .arg(&c)
            .assert()
    }

    fn stats_json(&self) -> serde_json::Value {
        let out = nexthop()
            .args(["fib", "stats", "--json", "--fib"])
            .arg(self.fib())
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    }

    fn gen_file(&self, name: &str) -> PathBuf {
        self.fib().join("current").join(name)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Entry {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
}

/// Every path under `dir` with its contents (files), target (symlinks) or kind.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let meta = fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(rel, Entry::Link(fs::read_link(&p).unwrap()));
            } else if meta.is_dir() {
                out.insert(rel, Entry::Dir);
                walk(root, &p, out);
            } else {
                out.insert(rel, Entry::File(fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Build, look up, update, look up again and read stats for one key type.
fn round_trip(key_type: &str, names: [&str; 4], alt_forms: &[(&str, &str)]) {
    let f = Fixture::new();
    let [a, b, c, d] = names;
    f.build(key_type, &format!("{a} 1\n{b} 1+3\n{c} drop\n"), &[])
        .success()
        .stdout(predicate::str::contains("3 names"));
    assert_eq!(f.lookup(&[a, b, c]), "1\n1+3\ndrop\n");
    for (form, want) in alt_forms {
        assert_eq!(f.lookup(&[form]), format!("{want}\n"), "{form}");
    }
    f.update(&format!("+ {d} controller\n- {a}\n= {b} 3+2+2\n"))
        .success()
        .stdout(
            predicate::str::contains("applied 3 changes")
                .and(predicate::str::contains("generation 1 -> 2")),
        );
    assert_eq!(f.lookup(&[b, c, d]), "2+3\ndrop\ncontroller\n");
    let s = f.stats_json();
    assert_eq!(s["key_type"], key_type);
    assert_eq!(s["names"], 3);
    assert_eq!(s["generation"], 2);
    assert_eq!(s["value_bits"], 8);
    nexthop()
        .args(["fib", "stats", "--fib"])
        .arg(f.fib())
        .assert()
        .success()
        .stdout(
            predicate::str::contains("bits/key").and(predicate::str::contains("reseed rebuilds")),
        );
}

#[test]
fn mac_fib_round_trips_build_lookup_update_stats() {
    round_trip(
        "mac",
        [
            "00:1b:21:00:00:01",
            "00:1b:21:00:00:02",
            "02:00:00:aa:bb:cc",
            "02:00:00:aa:bb:cd",
        ],
        &[("00-1B-21-00-00-01", "1")],
    );
}

#[test]
fn ipv4_fib_round_trips_build_lookup_update_stats() {
    round_trip(
        "ipv4",
        ["10.0.0.1", "10.0.0.2", "192.0.2.7", "198.51.100.1"],
        &[],
    );
}

#[test]
fn ipv6_fib_round_trips_build_lookup_update_stats() {
    round_trip(
        "ipv6",
        ["2001:db8::1", "2001:db8::2", "fd00::7", "::1"],
        &[("2001:DB8:0:0::1", "1")],
    );
}

#[test]
fn u64_fib_round_trips_build_lookup_update_stats() {
    round_trip(
        "u64",
        ["1", "18446744073709551615", "42", "7"],
        &[("0x2a", "drop")],
    );
}

#[test]
fn str_fib_round_trips_build_lookup_update_stats() {
    round_trip("str", ["/ndn/a", "/ndn/b#frag", "video.example", "x"], &[]);
}

#[test]
fn routes_with_comments_and_blank_lines_build() {
    let f = Fixture::new();
    f.build(
        "u64",
        "# header\n\n1 2   # trailing comment\n   \n2\tdrop\n#3 4\n",
        &[],
    )
    .success();
    assert_eq!(f.stats_json()["names"], 2);
    assert_eq!(f.lookup(&["1", "2"]), "2\ndrop\n");
}

#[test]
fn bad_routes_line_reports_file_and_line_and_writes_nothing() {
    let f = Fixture::new();
    f.build("mac", "00:00:00:00:00:01 1\n\n00:00:00:00:00:0g 2\n", &[])
        .failure()
        .stderr(
            predicate::str::starts_with("error: ")
                .and(predicate::str::contains("routes.txt:3: invalid name")),
        );
    assert!(!f.fib().exists());
    f.build("u64", "1 1\n2 3 4\n", &[])
        .failure()
        .stderr(predicate::str::contains("routes.txt:2: expected 2 fields"));
    f.build("u64", "1 1\n2 port9\n", &[])
        .failure()
        .stderr(predicate::str::contains(
            "routes.txt:2: invalid action 'port9'",
        ));
}

#[test]
fn duplicate_name_is_reported_with_both_lines() {
    let f = Fixture::new();
    f.build("ipv4", "10.0.0.1 1\n10.0.0.2 2\n10.0.0.1 3\n", &[])
        .failure()
        .stderr(predicate::str::contains(
            "routes.txt:3: duplicate name 10.0.0.1 (first defined on line 1)",
        ));
}

#[test]
fn too_many_actions_for_value_bits_says_to_rebuild_with_more() {
    let f = Fixture::new();
    f.build("u64", "1 1\n2 2\n3 3\n", &["--value-bits", "1"])
        .failure()
        .stderr(predicate::str::contains(
            "routes.txt:3: action table full: 2^1 actions for l = 1",
        ));
}

fn assert_update_refused_and_fib_unchanged(changes: &str, expect: &str) {
    let f = Fixture::new();
    f.build("u64", "1 1\n2 2\n3 drop\n", &[]).success();
    let before = tree(&f.fib());
    f.update(changes)
        .failure()
        .stderr(predicate::str::starts_with("error: ").and(predicate::str::contains(expect)));
    assert_eq!(tree(&f.fib()), before, "FIB directory changed");
    assert_eq!(f.lookup(&["1", "2", "3"]), "1\n2\ndrop\n");
}

#[test]
fn malformed_changes_line_leaves_fib_unchanged() {
    assert_update_refused_and_fib_unchanged(
        "+ 4 1\n- 1\n* 2 3\n",
        "changes.txt:3: unknown change '*'",
    );
    assert_update_refused_and_fib_unchanged("+ 4\n", "changes.txt:1: '+' takes NAME ACTION");
}

#[test]
fn delete_of_missing_name_leaves_fib_unchanged() {
    assert_update_refused_and_fib_unchanged(
        "+ 4 1\n- 1\n\n- 9\n",
        "changes.txt:4: name 9 not found",
    );
}

#[test]
fn add_of_existing_name_leaves_fib_unchanged() {
    assert_update_refused_and_fib_unchanged("- 1\n+ 1 2\n+ 2 3\n", "changes.txt:3: cannot add 2");
}

#[test]
fn unknown_name_misses_with_check_bits() {
    let f = Fixture::new();
    f.build(
        "mac",
        "00:00:00:00:00:01 1\n00:00:00:00:00:02 2\n",
        &["--check-bits", "16"],
    )
    .success();
    assert_eq!(
        f.lookup(&[
            "00:00:00:00:00:01",
            "66:55:44:33:22:11",
            "00:00:00:00:00:02"
        ]),
        "1\nmiss\n2\n"
    );
}

#[test]
fn corrupted_snapshot_fails_lookup_with_checksum_error() {
    let f = Fixture::new();
    f.build("u64", "1 1\n2 2\n", &[]).success();
    let snap = f.gen_file("snapshot.bin");
    let mut bytes = fs::read(&snap).unwrap();
    bytes[130] ^= 0x01;
    fs::write(&snap, bytes).unwrap();
    nexthop()
        .args(["fib", "lookup", "--fib"])
        .arg(f.fib())
        .arg("1")
        .assert()
        .failure()
        .stdout("")
        .stderr(predicate::str::contains(
            "gen-1/snapshot.bin: checksum mismatch",
        ));
}

#[test]
fn truncated_control_state_fails_update_clearly() {
    let f = Fixture::new();
    f.build("u64", "1 1\n2 2\n", &[]).success();
    let control = f.gen_file("control.bin");
    let bytes = fs::read(&control).unwrap();
    fs::write(&control, &bytes[..bytes.len() / 2]).unwrap();
    let before = tree(&f.fib());
    f.update("+ 3 1\n")
        .failure()
        .stderr(predicate::str::contains("gen-1/control.bin: size mismatch"));
    assert_eq!(tree(&f.fib()), before);
}

#[test]
fn stdin_lookups_equal_argument_lookups() {
    let f = Fixture::new();
    let routes: String = (0..5000u64)
        .map(|i| format!("{i} {}\n", ["1", "2", "1+2", "drop"][i as usize % 4]))
        .collect();
    f.build("u64", &routes, &[]).success();
    let names: Vec<String> = (0..5000u64).rev().map(|i| i.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let by_args = f.lookup(&refs);
    let stdin = format!("# names\n\n{}\n", names.join("\n\n"));
    let out = nexthop()
        .args(["fib", "lookup", "--fib"])
        .arg(f.fib())
        .write_stdin(stdin)
        .assert()
        .success();
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), by_args);
    assert_eq!(by_args.lines().count(), 5000);
    assert_eq!(by_args.lines().next(), Some("drop"));
}

#[test]
fn invalid_lookup_name_answers_earlier_names_then_fails() {
    let f = Fixture::new();
    f.build("ipv4", "10.0.0.1 1\n10.0.0.2 2\n", &[]).success();
    nexthop()
        .args(["fib", "lookup", "--fib"])
        .arg(f.fib())
        .write_stdin("10.0.0.2\n10.0.0.300\n10.0.0.1\n")
        .assert()
        .failure()
        .stdout("2\n")
        .stderr(predicate::str::contains(
            "error: stdin:2: invalid name '10.0.0.300': expected an IPv4 address",
        ))
        .stderr(predicate::str::contains(
            "the names after it were not looked up",
        ));
    // Blank and comment lines count: the line number is the input's.
    nexthop()
        .args(["fib", "lookup", "--fib"])
        .arg(f.fib())
        .write_stdin("# names\n\n10.0.0.1\nnot-an-address\n")
        .assert()
        .failure()
        .stdout("1\n")
        .stderr(predicate::str::contains(
            "error: stdin:4: invalid name 'not-an-address'",
        ));
    // Arguments are numbered too.
    nexthop()
        .args(["fib", "lookup", "--fib"])
        .arg(f.fib())
        .args(["10.0.0.1", "10.0.0.2", "x"])
        .assert()
        .failure()
        .stdout("1\n2\n")
        .stderr(predicate::str::contains(
            "error: argument 3: invalid name 'x'",
        ));
}

#[test]
fn json_lookup_prints_one_object_per_name_with_null_for_a_miss() {
    let f = Fixture::new();
    f.build(
        "ipv4",
        "10.0.0.1 1+3\n10.0.0.2 drop\n",
        &["--check-bits", "16"],
    )
    .success();
    let out = nexthop()
        .args(["fib", "lookup", "--json", "--fib"])
        .arg(f.fib())
        .write_stdin("10.0.0.1\n10.0.0.2\n192.0.2.9\n")
        .assert()
        .success();
    let v: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        v,
        [
            serde_json::json!({"name": "10.0.0.1", "action": "1+3"}),
            serde_json::json!({"name": "10.0.0.2", "action": "drop"}),
            serde_json::json!({"name": "192.0.2.9", "action": null}),
        ]
    );
}

#[test]
fn build_refuses_a_non_empty_directory_that_is_not_a_fib() {
    let f = Fixture::new();
    fs::create_dir(f.fib()).unwrap();
    fs::write(f.fib().join("precious.txt"), "keep me").unwrap();
    f.build("u64", "1 1\n", &[])
        .failure()
        .stderr(predicate::str::contains("not a FIB"));
    assert_eq!(
        fs::read_to_string(f.fib().join("precious.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn rebuilding_replaces_the_fib_with_a_new_generation() {
    let f = Fixture::new();
    f.build("u64", "1 1\n", &[]).success();
    f.build(
        "u64",
        "1 2\n2 3\n",
        &["--sizing", "tight", "--capacity", "1e2"],
    )
    .success();
    let mut names: Vec<String> = fs::read_dir(f.fib())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // The previous generation stays for readers that opened it.
    assert_eq!(names, ["current", "gen-1", "gen-2"]);
    assert_eq!(
        fs::read_link(f.fib().join("current")).unwrap(),
        Path::new("gen-2")
    );
    assert_eq!(f.lookup(&["1", "2"]), "2\n3\n");
    let s = f.stats_json();
    assert_eq!(s["sizing"], "tight");
    assert!(s["capacity"].as_u64().unwrap() >= 100);
    // A count that is not a whole number is refused before anything runs.
    f.build("u64", "1 2\n", &["--capacity", "2.5"])
        .failure()
        .stderr(predicates::str::contains("expected a whole number"));
}

#[test]
fn manifest_lists_files_with_checksums() {
    let f = Fixture::new();
    f.build("mac", "00:00:00:00:00:01 1\n", &["--seed", "7"])
        .success();
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(f.gen_file("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["format"], "nexthop-fib");
    assert_eq!(m["key_type"], "mac");
    assert_eq!(m["generation"], 1);
    assert_eq!(m["config"]["seed"], 7);
    let files: Vec<&str> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["control.bin", "snapshot.bin", "actions.txt"]);
    assert_eq!(
        fs::read_to_string(f.gen_file("actions.txt")).unwrap(),
        "0 1\n"
    );
}

#[test]
fn lookup_of_a_missing_directory_fails_clearly() {
    nexthop()
        .args(["fib", "lookup", "--fib", "/nonexistent/fib", "1"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("not a FIB directory"));
}

#[test]
fn demo_builds_verifies_and_updates_with_zero_mismatches() {
    let t = tempfile::tempdir().unwrap();
    let out = nexthop()
        .args(["demo", "--names", "20000", "--out"])
        .arg(t.path())
        .assert()
        .success()
        .stdout(
            predicate::str::contains("mismatches     0 after build, 0 after updates")
                .and(predicate::str::contains("M lookups/s"))
                .and(predicate::str::contains("nexthop fib stats --fib")),
        );
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("[7/7] verify"), "{stdout}");
    // The directory is a FIB the other commands read.
    let s = nexthop()
        .args(["fib", "stats", "--json", "--fib"])
        .arg(t.path())
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&s.get_output().stdout).unwrap();
    assert_eq!(v["key_type"], "mac");
    assert_eq!(v["generation"], 2);
    // A second run replaces the FIB in place.
    nexthop()
        .args(["demo", "--names", "2000", "--out"])
        .arg(t.path())
        .assert()
        .success();
}

#[test]
fn demo_json_prints_the_summary_object_on_stdout_and_the_text_on_stderr() {
    let t = tempfile::tempdir().unwrap();
    let out = nexthop()
        .args(["demo", "--names", "3000", "--json", "--out"])
        .arg(t.path())
        .assert()
        .success();
    let o = out.get_output();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["names_built"], 3000);
    assert_eq!(v["mismatches_after_build"], 0);
    assert_eq!(v["mismatches_after_updates"], 0);
    assert_eq!(v["updates"], 300);
    assert_eq!(v["generation"], 2);
    assert!(v["lookups_per_second"].as_f64().unwrap() > 0.0, "{v}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[7/7] verify"), "{err}");
    assert!(err.contains("mismatches     0 after build"), "{err}");
}

#[test]
fn json_build_and_update_report_what_they_did() {
    let f = Fixture::new();
    let out = f
        .build(
            "mac",
            "02:00:00:00:00:01 1\n02:00:00:00:00:02 2+4\n",
            &["--json"],
        )
        .success();
    let b: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(b["names"], 2);
    assert_eq!(b["actions"], 2);
    assert_eq!(b["generation"], 1);
    assert_eq!(b["key_type"], "mac");
    let c = f.file(
        "changes.txt",
        "+ 02:00:00:00:00:03 drop\n= 02:00:00:00:00:01 3\n",
    );
    let out = nexthop()
        .args(["fib", "update", "--json", "--fib"])
        .arg(f.fib())
        .arg("--changes")
        .arg(&c)
        .assert()
        .success();
    let u: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(u["changes"], 2);
    assert_eq!((u["adds"].clone(), u["sets"].clone()), (1.into(), 1.into()));
    assert_eq!(
        (u["from_generation"].clone(), u["generation"].clone()),
        (1.into(), 2.into())
    );
    assert_eq!(u["names"], 3);
    // The text form says "1 add", not "1 adds".
    f.update("- 02:00:00:00:00:03\n")
        .success()
        .stdout(predicate::str::contains(
            "applied 1 change (0 adds, 1 delete, 0 action changes)",
        ))
        .stdout(predicate::str::contains(", 2 names"));
}

#[test]
fn version_names_the_commit_and_the_enabled_features() {
    let out = nexthop().arg("--version").assert().success();
    let v = stdout(&out);
    let want = format!("nexthop {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(v.starts_with(&want), "{v}");
    let commit = v[want.len()..].split(';').next().unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{v}"
    );
    let features = v
        .split("features: ")
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches(')');
    assert_eq!(features == "none", cfg!(not(feature = "afxdp")), "{v}");
    assert_eq!(
        features.split(", ").any(|f| f == "afxdp"),
        cfg!(feature = "afxdp"),
        "{v}"
    );
    // Subcommands answer the same.
    let sub = nexthop().args(["lab", "--version"]).assert().success();
    assert!(stdout(&sub).contains("(commit "), "{}", stdout(&sub));
}
