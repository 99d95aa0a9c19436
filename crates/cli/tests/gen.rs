//! `nexthop gen` writes frames that `nexthop forward` reads back: every
//! frame is counted, frames to unknown names are exactly the misses.

use std::path::Path;
use std::process::Command;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

fn nexthop(args: &[&str]) -> String {
    let out = Command::new(NEXTHOP)
        .args(args)
        .output()
        .expect("run nexthop");
    assert!(
        out.status.success(),
        "nexthop {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn generated_frames_forward_with_unknown_names_as_exact_misses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = |n: &str| dir.path().join(n).display().to_string();
    let routes: String = (0..500u32)
        .map(|i| {
            let b = i.to_be_bytes();
            format!(
                "02:00:00:{:02x}:{:02x}:{:02x} {}\n",
                b[1],
                b[2],
                b[3],
                1 + i % 4
            )
        })
        .collect();
    std::fs::write(p("routes.txt"), routes).expect("write routes");
    nexthop(&[
        "fib",
        "build",
        "--key-type",
        "mac",
        "--routes",
        &p("routes.txt"),
        "--out",
        &p("fib"),
        "--check-bits",
        "32",
    ]);
    let said = nexthop(&[
        "gen",
        "--routes",
        &p("routes.txt"),
        "--frames",
        "5000",
        "--unknown",
        "20",
        "--seed",
        "7",
        "--out",
        &p("in.pcap"),
    ]);
    // "... N to names of FILE (500 names), M to unknown names"
    let unknown: u64 = said
        .rsplit(", ")
        .next()
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected gen output: {said}"));
    assert!((700..1300).contains(&unknown), "{said}");
    let line = nexthop(&[
        "forward",
        "--fib",
        &p("fib"),
        "--in-pcap",
        &p("in.pcap"),
        "--out-dir",
        &p("out"),
    ]);
    assert_eq!(field(&line, "frames_in"), "5000", "{line}");
    assert_eq!(field(&line, "misses"), unknown.to_string(), "{line}");
    assert_eq!(
        field(&line, "forwarded"),
        (5000 - unknown).to_string(),
        "{line}"
    );
    for port in 1..=4 {
        assert!(Path::new(&p(&format!("out/port-{port}.pcap"))).exists());
    }
}

/// `--json` reports the same counts as the sentence, for the same seed.
#[test]
fn gen_json_reports_the_counts_of_the_text_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = |n: &str| dir.path().join(n).display().to_string();
    std::fs::write(
        p("routes.txt"),
        "02:00:00:00:00:01 1\n02:00:00:00:00:02 2\n",
    )
    .expect("write routes");
    let args = |out: &str| {
        [
            "gen",
            "--routes",
            &p("routes.txt"),
            "--frames",
            "1000",
            "--unknown",
            "30",
            "--seed",
            "3",
            "--out",
            &p(out),
        ]
        .map(String::from)
    };
    let text = nexthop(
        &args("a.pcap")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let mut j = args("b.pcap").to_vec();
    j.push("--json".into());
    let json = nexthop(&j.iter().map(String::as_str).collect::<Vec<_>>());
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert_eq!(v["frames"], 1000, "{json}");
    assert_eq!(v["names"], 2, "{json}");
    let unknown = v["to_unknown"].as_u64().expect("to_unknown");
    assert_eq!(v["to_known"].as_u64(), Some(1000 - unknown), "{json}");
    assert!(
        text.ends_with(&format!(", {unknown} to unknown names\n")),
        "{text} against {json}"
    );
    assert_eq!(
        std::fs::read(p("a.pcap")).expect("a.pcap"),
        std::fs::read(p("b.pcap")).expect("b.pcap")
    );
}

#[test]
fn gen_refuses_bad_sizes_and_percentages() {
    let dir = tempfile::tempdir().expect("temp dir");
    let routes = dir.path().join("r.txt");
    std::fs::write(&routes, "02:00:00:00:00:01 1\n").expect("write routes");
    for bad in [["--size", "20"], ["--unknown", "150"]] {
        let out = Command::new(NEXTHOP)
            .args(["gen", "--routes", &routes.display().to_string(), "--out"])
            .arg(dir.path().join("x.pcap"))
            .args(bad)
            .output()
            .expect("run nexthop");
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains("must be"));
    }
}
