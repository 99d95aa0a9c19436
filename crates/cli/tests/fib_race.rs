//! `nexthop fib lookup` racing `nexthop fib update` on one FIB directory:
//! every lookup answers (the generation it opened survives the updates,
//! or it resolves `current` again), and old generations do not pile up.

mod fixture;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fixture::Fixture;

fn nexthop(args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("nexthop");
    match Command::new(bin).args(args).output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run nexthop: {e}"),
    }
}

#[test]
fn lookups_racing_hundreds_of_updates_never_fail_and_old_generations_go() {
    const UPDATES: usize = 200;
    let f = Fixture::new();
    let routes: String = (1..=200).map(|i| format!("{i} {}\n", i % 4)).collect();
    let routes = f.file("routes.txt", routes);
    let fib = f.path("fib");
    let fib_s = fib.to_str().unwrap().to_string();
    let build = nexthop(&[
        "fib",
        "build",
        "--key-type",
        "u64",
        "--routes",
        routes.to_str().unwrap(),
        "--out",
        &fib_s,
    ]);
    assert!(build.status.success(), "{build:?}");
    // Name 1000 flips between present (port 7) and absent; name 5 always
    // answers 1.
    let add = f.file("add.txt", "+ 1000 7\n");
    let del = f.file("del.txt", "- 1000\n");

    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            let fib_s = fib_s.clone();
            std::thread::spawn(move || {
                let mut lookups = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let o = nexthop(&["fib", "lookup", "--fib", &fib_s, "5"]);
                    let err = String::from_utf8_lossy(&o.stderr);
                    assert!(o.status.success(), "lookup {lookups} failed: {err}");
                    assert_eq!(String::from_utf8_lossy(&o.stdout), "1\n");
                    lookups += 1;
                }
                lookups
            })
        })
        .collect();
    for i in 0..UPDATES {
        let changes = if i % 2 == 0 { &add } else { &del };
        let o = nexthop(&[
            "fib",
            "update",
            "--fib",
            &fib_s,
            "--changes",
            changes.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "update {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    stop.store(true, Ordering::Relaxed);
    let lookups: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(lookups > 0);
    eprintln!("{lookups} lookups raced {UPDATES} updates");

    // The FIB is at generation 1 + UPDATES with at most three older ones.
    let names: Vec<String> = std::fs::read_dir(&fib)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let gens = names.iter().filter(|n| n.starts_with("gen-")).count();
    assert!((2..=4).contains(&gens), "{names:?}");
    assert!(names.contains(&format!("gen-{}", 1 + UPDATES)), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
}
