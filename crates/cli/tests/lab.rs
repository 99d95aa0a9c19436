//! `nexthop lab`, the README's main job, end to end: the offline pcap
//! variant (checks every output frame against the plan), and, as root,
//! the namespace topology (source, forwarder, 4 sinks, controller) with
//! live changes, an interrupted run, and the cleanup of its namespaces.
//! Without root the namespace test checks that the command says so and
//! falls back to the pcap variant.

use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

mod lab_common;

use lab_common::{is_root, lab, lab_out, NEXTHOP};

/// Namespaces left behind by the lab process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let prefix = format!("nhlab{pid}-");
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// `nexthop lab ARGS --out DIR/lab` in a fresh temporary directory `DIR`,
/// returned last so the caller can read the run's files (`DIR/lab`).
fn lab_in_tempdir(args: &[&str]) -> (bool, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = lab_out(args, &dir.path().join("lab"));
    (ok, stdout, stderr, dir)
}

#[test]
fn pcap_variant_checks_every_frame_under_live_changes() {
    let (ok, stdout, stderr, dir) = lab_in_tempdir(&[
        "--pcap",
        "--names",
        "20000",
        "--duration",
        "1",
        "--update-rate",
        "20000",
        "--pcap-frames",
        "200000",
    ]);
    let out = dir.path().join("lab");
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("running the offline pcap variant"),
        "{stdout}"
    );
    assert!(stdout.contains("misforwarded  0"), "{stdout}");
    assert!(
        stdout.contains("updates       20000 changes through controller -> follower"),
        "{stdout}"
    );
    // Every port got frames, and the input file is gone.
    for p in 1..=4 {
        assert!(out.join(format!("pcap-out/port-{p}.pcap")).exists());
    }
    assert!(!out.join("in.pcap").exists());
    // summary.json carries the same figures.
    let j = summary_json(&out);
    assert_eq!(j["variant"], "pcap");
    assert_eq!(j["ok"], true);
    assert_eq!(j["misforwarded"], 0);
    assert_eq!(j["updates"]["changes"], 20000);
    assert!(
        j["forwarder"]["pipeline_mpps"].as_f64().unwrap() > 0.0,
        "{j}"
    );
    assert_eq!(j["forwarder"]["frames_in"], 200000);
    let ports: u64 = (1..=4)
        .map(|p| j["ports"][p.to_string()].as_u64().unwrap())
        .sum();
    assert_eq!(j["delivered"].as_u64(), Some(ports));
    assert!(j["source"].is_null() && j["final_wave"].is_null(), "{j}");
    assert_final_fib_saved(&out, &j);
}

/// `OUT/summary.json`, parsed.
fn summary_json(out: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// `OUT/fib` is at the summary's final generation, past the initial one,
/// and `OUT/changes.txt` holds the changes it got.
fn assert_final_fib_saved(out: &std::path::Path, j: &serde_json::Value) {
    let first = j["fib"]["initial_generation"].as_u64().unwrap();
    let last = j["fib"]["final_generation"].as_u64().unwrap();
    assert!(last > first, "{j}");
    let stats = Command::new(NEXTHOP)
        .args(["fib", "stats", "--json", "--fib"])
        .arg(out.join("fib"))
        .output()
        .unwrap();
    assert!(stats.status.success());
    let st: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(st["generation"].as_u64(), Some(last), "{st}");
    let names = j["fib"]["names"].as_u64().unwrap() + j["fib"]["added"].as_u64().unwrap()
        - j["fib"]["deleted"].as_u64().unwrap();
    assert_eq!(st["names"].as_u64(), Some(names), "{st}");
    assert!(out.join("changes.txt").exists());
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["--names", "0"], "--names"),
        (vec!["--duration=-1"], "--duration"),
        (vec!["--update-rate", "nan"], "--update-rate"),
        (vec!["--io", "dpdk"], "--io"),
        (vec!["--changes-per-delta", "0"], "--changes-per-delta"),
        (vec!["--alternate=-1"], "--alternate"),
        (vec!["--alternate", "0.1"], "--alternate"),
        (vec!["--alternate", "3", "--duration", "5"], "--alternate"),
        (vec!["--alternate", "inf"], "--alternate"),
    ] {
        let mut all = args.clone();
        all.extend(["--out", o, "--pcap"]);
        let (ok, stdout, stderr) = lab(&all);
        assert!(!ok, "{args:?} accepted:\n{stdout}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn namespace_lab_forwards_every_frame_to_its_ports_and_cleans_up() {
    let (ok, stdout, stderr, dir) = lab_in_tempdir(&[
        "--names",
        "20000",
        "--duration",
        "2",
        "--update-rate",
        "5000",
        "--rate",
        "100000",
        "--final-names",
        "20000",
        "--workers",
        "2",
    ]);
    if !is_root() {
        assert!(stdout.contains("need root"), "{stdout}");
        assert!(
            stdout.contains("running the offline pcap variant"),
            "{stdout}"
        );
        return;
    }
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("misforwarded  0"), "{stdout}");
    assert!(
        stdout.contains("all acknowledged by the forwarder: yes"),
        "{stdout}"
    );
    assert!(stdout.contains("0 on a wrong port"), "{stdout}");
    assert!(stdout.contains("updates       10000 changes"), "{stdout}");
    assert!(stdout.contains("fib_rejects=0"), "{stdout}");
    // Every acknowledged delta is timed from the controller's change.
    let prop = stdout
        .lines()
        .find(|l| l.contains("propagation   controller change -> forwarder Ack"))
        .unwrap_or_else(|| panic!("no propagation line: {stdout}"));
    assert!(prop.contains("over 10000 changes"), "{prop}");
    assert!(stdout.contains("(2 workers; "), "{stdout}");
    // Two workers and the rest need three CPUs: pinned only where there
    // are that many.
    let cpus = stdout
        .lines()
        .find(|l| l.contains("] cpus "))
        .unwrap_or_else(|| panic!("no cpus line: {stdout}"));
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n >= 3 {
        assert!(cpus.contains("forwarder workers on CPU"), "{cpus}");
    } else {
        assert!(
            cpus.contains("threads not pinned (2 workers and the rest need 3 CPUs"),
            "{cpus}"
        );
    }
    // Per-thread CPU of the traffic phase: both workers, the source and
    // the update path are measured (the forwarder is a separate process).
    let cpu = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("cpu"))
        .unwrap_or_else(|| panic!("no cpu line: {stdout}"));
    for part in [
        "worker-0 ",
        "worker-1 ",
        "lab source ",
        "update path ",
        "fib-follower ",
    ] {
        assert!(cpu.contains(part), "{part:?} missing: {cpu}");
    }
    let cores_of = |what: &str| -> f64 {
        let rest = &cpu[cpu.find(what).unwrap() + what.len()..];
        rest.split(|c: char| c != '.' && !c.is_ascii_digit())
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number after {what:?}: {cpu}"))
    };
    // 100k frames/s for 2 s keep the source and the forwarder busy.
    assert!(cores_of("lab source ") > 0.0, "{cpu}");
    assert!(
        cores_of("cores during the traffic: forwarder ") > 0.0,
        "{cpu}"
    );
    // Every sink received traffic.
    let sinks = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("sinks"))
        .unwrap_or_default()
        .to_string();
    for p in 1..=4 {
        let n: u64 = sinks
            .split_whitespace()
            .find_map(|t| t.trim_start_matches('(').strip_prefix(&format!("{p}:")))
            .and_then(|v| v.trim_end_matches([')', ';']).parse().ok())
            .unwrap_or(0);
        assert!(n > 0, "sink {p} got nothing: {sinks}");
    }
    // summary.json carries the same figures.
    let out = dir.path().join("lab");
    let j = summary_json(&out);
    assert_eq!(j["variant"], "live");
    assert_eq!(j["ok"], true);
    assert_eq!(j["misforwarded"], 0);
    assert_eq!(j["converged"], true);
    assert_eq!(j["updates"]["changes"], 10000);
    assert_eq!(j["propagation"]["samples"], 10000);
    assert!(j["source"]["frames"].as_u64().unwrap() > 0, "{j}");
    assert!(
        j["forwarder"]["traffic_mpps"].as_f64().unwrap() > 0.0,
        "{j}"
    );
    assert!(j["forwarder"]["run_mpps"].as_f64().is_some(), "{j}");
    assert_eq!(j["forwarder"]["fib_rejects"], 0);
    assert!(j["cpu"]["workers"].as_f64().is_some(), "{j}");
    let ports: u64 = (1..=4)
        .map(|p| j["ports"][p.to_string()].as_u64().unwrap())
        .sum();
    assert_eq!(j["delivered"].as_u64(), Some(ports));
    // The final wave's frames, counted exactly once the forwarder's
    // counters settled (not stale once-a-second samples): every frame of
    // the wave, plus at most a few of the links' own (IPv6 neighbour
    // discovery).
    let w = &j["final_wave"];
    assert_eq!(w["names"], 20000, "{w}");
    assert_eq!(w["wrong"], 0, "{w}");
    let got =
        w["forwarder_received"].as_u64().unwrap() + w["forwarder_ring_drops"].as_u64().unwrap();
    assert!((20000..=20016).contains(&got), "{w}");
    assert!(
        stdout.contains("during the wave (settled counters)"),
        "{stdout}"
    );
    assert_final_fib_saved(&out, &j);
}

/// `--alternate`: phases without and with changes, each phase's changes
/// counted, and the same-run ratios in the summary.
#[test]
fn namespace_lab_alternates_phases_without_and_with_changes() {
    if !is_root() {
        return;
    }
    let (ok, stdout, stderr, _dir) = lab_in_tempdir(&[
        "--names",
        "20000",
        "--duration",
        "2",
        "--alternate",
        "0.5",
        "--update-rate",
        "10000",
        "--rate",
        "100000",
        "--final-names",
        "2000",
    ]);
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("misforwarded  0"), "{stdout}");
    // 10k changes/s during 1 s of the 2 s: 10000 changes, none of them in
    // a phase without changes.
    assert!(
        stdout.contains("updates       10000 changes in 1.00 s of phases with changes"),
        "{stdout}"
    );
    let phases: Vec<&str> = stdout.lines().filter(|l| l.contains("] phase ")).collect();
    assert!(phases.len() >= 3, "{stdout}");
    let mut with_changes = 0;
    for (k, l) in phases.iter().enumerate() {
        assert!(l.contains(&format!("phase {k} ")), "{l}");
        if k % 2 == 0 {
            assert!(l.contains("without changes (0 applied)"), "{l}");
        } else {
            assert!(l.contains("with    changes ("), "{l}");
            with_changes += 1;
        }
    }
    assert!(with_changes >= 1, "{stdout}");
    // Every phase is printed, the last one (cut by the end of the traffic)
    // too; the summary counts the full ones: 4 of 0.5 s in 2 s, or 3 when
    // a loaded machine starts the traffic late and the last phase is cut
    // short.
    let counted = (phases.len().saturating_sub(1).max(3)..=phases.len())
        .rev()
        .find(|&n| {
            let with = n / 2;
            stdout.contains(&format!(
                "phases        {n} phases of 0.5 s ({} without changes, {with} with): forwarded ",
                n - with
            ))
        });
    assert!(
        counted.is_some(),
        "no summary of the {} phases printed (or all but the last):\n{stdout}",
        phases.len()
    );
    assert!(stdout.contains("per worker CPU-second "), "{stdout}");
}

/// `--io afxdp`: the forwarder's ports bind AF_XDP sockets on the veths
/// (or the run fails: no silent fallback), and the same checks hold.
#[test]
fn namespace_lab_runs_the_forwarder_on_af_xdp() {
    if !is_root() {
        return;
    }
    let (ok, stdout, stderr, dir) = lab_in_tempdir(&[
        "--names",
        "10000",
        "--duration",
        "1",
        "--update-rate",
        "2000",
        "--rate",
        "100000",
        "--final-names",
        "2000",
        "--io",
        "afxdp",
    ]);
    let out = dir.path().join("lab");
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let fwd = stdout
        .lines()
        .find(|l| l.contains("] forwarder  nexthop run"))
        .unwrap_or_else(|| panic!("no forwarder line: {stdout}"));
    assert!(fwd.contains("io=0:afxdp"), "{fwd}");
    assert!(!fwd.contains("afpacket"), "{fwd}");
    // One worker: on a machine of 2 or more CPUs it gets the last one and
    // the forwarder is told so.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(
            stdout.contains("] cpus       forwarder worker on CPU"),
            "{stdout}"
        );
        let log = std::fs::read_to_string(out.join("forwarder.err")).unwrap();
        assert!(
            log.contains(" worker_cpus=") && log.contains(" control_cpus="),
            "{log}"
        );
    }
    assert!(stdout.contains("misforwarded  0"), "{stdout}");
    assert!(
        stdout.contains("2000 exactly on their final ports"),
        "{stdout}"
    );
    assert!(
        stdout.contains("all acknowledged by the forwarder: yes"),
        "{stdout}"
    );
}

#[test]
fn an_interrupted_lab_removes_its_namespaces_and_forwarder() {
    if !is_root() {
        eprintln!(
            "an_interrupted_lab...: needs root for namespaces; the pcap fallback is covered above"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lab");
    let mut child = Command::new(NEXTHOP)
        .args([
            "lab",
            "--names",
            "5000",
            "--duration",
            "60",
            "--rate",
            "20000",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t = Instant::now();
    while !out.join("forwarder.err").exists()
        || !std::fs::read_to_string(out.join("forwarder.err"))
            .unwrap_or_default()
            .contains("forwarding")
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the lab did not start"
        );
        sleep(Duration::from_millis(50));
    }
    assert_eq!(namespaces_of(pid).len(), 6, "{:?}", namespaces_of(pid));
    sleep(Duration::from_millis(500));
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(namespaces_of(pid).is_empty(), "{:?}", namespaces_of(pid));
    // The forwarder child is gone too.
    let ps = Command::new("pgrep")
        .args(["-f", &format!("{}", out.join("controller.key").display())])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    assert!(ps.trim().is_empty(), "forwarder still running: {ps}");
}

/// `--json`: stdout is the summary object (the figures of summary.json),
/// the progress and the text summary go to stderr.
#[test]
fn json_lab_prints_the_summary_object_on_stdout_and_the_text_on_stderr() {
    let (ok, stdout, stderr, dir) = lab_in_tempdir(&[
        "--pcap",
        "--json",
        "--names",
        "2000",
        "--duration",
        "1",
        "--update-rate",
        "1000",
        "--pcap-frames",
        "20000",
    ]);
    assert!(ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let j: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is one JSON object");
    assert_eq!(j["variant"], "pcap");
    assert_eq!(j["misforwarded"], 0);
    assert_eq!(j["updates"]["changes"], 1000);
    assert_eq!(j, summary_json(&dir.path().join("lab")));
    assert!(stderr.contains("misforwarded  0"), "{stderr}");
    assert!(stderr.contains("[   "), "{stderr}");
}
