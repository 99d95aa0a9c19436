//! Log events of the `nexthop` binary: `--log-format json` writes one JSON
//! object per line on stderr, `--log-level` filters them, and both are
//! global flags (accepted before or after the subcommand).

mod fixture;

use std::path::PathBuf;

use fixture::{nexthop, Fixture};

/// A MAC FIB directory and a controller key file in the fixture.
fn fib_and_key(f: &Fixture) -> (PathBuf, PathBuf) {
    let routes = f.file("routes.txt", "02:00:00:00:00:01 1\n02:00:00:00:00:02 2\n");
    let fib = f.path("fib");
    nexthop()
        .args(["fib", "build", "--key-type", "mac", "--routes"])
        .arg(&routes)
        .arg("--out")
        .arg(&fib)
        .assert()
        .success();
    let key = f.file("key", "0123456789abcdef0123456789abcdef\n");
    // The controller refuses key files others can read.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod 600 the key file");
    (fib, key)
}

/// `nexthop ARGS controller ...` serving for a moment; its stderr.
fn controller_stderr(f: &Fixture, before: &[&str], after: &[&str]) -> String {
    let (fib, key) = fib_and_key(f);
    let out = nexthop()
        .env_remove("RUST_LOG")
        .args(before)
        .arg("controller")
        .arg("--fib")
        .arg(&fib)
        .arg("--key-file")
        .arg(&key)
        .args(["--listen", "127.0.0.1:0", "--duration", "0.1"])
        .args(after)
        .assert()
        .success();
    String::from_utf8(out.get_output().stderr.clone()).expect("stderr is UTF-8")
}

#[test]
fn log_format_json_writes_one_json_object_per_line_on_stderr() {
    let f = Fixture::new();
    let err = controller_stderr(&f, &["--log-format", "json"], &[]);
    // Every log event is a JSON object on a line of its own (lines that
    // are not events, such as plain messages of a library, may sit between
    // them); none is in the text format.
    let events: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\n{err}"))
        })
        .collect();
    assert!(
        !err.lines().any(|l| l.contains("Z  INFO ")),
        "a text event in JSON mode:\n{err}"
    );
    let serving = events
        .iter()
        .find(|v| v["message"] == "controller serving")
        .unwrap_or_else(|| panic!("no serving event:\n{err}"));
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["names"], 2);
    assert_eq!(serving["key_type"], "mac");
    assert!(serving["timestamp"].is_string(), "{serving}");
    assert!(
        events.iter().any(|v| v["message"] == "controller stopped"),
        "{err}"
    );
}

#[test]
fn log_level_filters_events_and_is_global() {
    let f = Fixture::new();
    // Default: info events as text lines.
    let err = controller_stderr(&f, &[], &[]);
    assert!(
        err.lines().any(|l| l.contains("Z  INFO ")
            && l.contains("controller serving fib=")
            && l.contains(" names=2 ")),
        "{err}"
    );
    // After the subcommand too; warn hides the info events.
    let f = Fixture::new();
    let err = controller_stderr(&f, &[], &["--log-level", "warn"]);
    assert!(!err.contains("controller serving"), "{err}");
}

#[test]
fn a_bad_log_level_is_refused_with_the_reason() {
    nexthop()
        .args(["--log-level", "=[", "fib", "stats", "--fib", "nowhere"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("log level \"=[\""));
}
