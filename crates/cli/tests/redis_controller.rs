//! End-to-end: `nexthop controller --redis` processes against a real
//! `redis-server` started by the test (stopped also on failure). The active
//! controller is killed (SIGKILL) in the middle of publishing a large
//! changes file; the standby takes the lease over within a few seconds,
//! rebuilds from Redis and applies its own changes file after the changes
//! that made it; a follower (the library `nexthop run --redis` uses) sees
//! whole entries only, in order, and ends with exactly the FIB the model
//! says.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nexthop_control::{AuthKey, RedisFollower, RedisFollowerConfig};
use nexthop_othello::fib::Action;
use nexthop_testutil::redis::RedisServer;

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");
const KEY: &str = "redis-e2e-test-secret-0123456789\n";
const BASE: u32 = 2000;
const CHURN: u32 = 200_000;
/// Route changes per stream entry.
const PER: u64 = 4;

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x6e, b[0], b[1], b[2], b[3]]
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Kills the controller processes when dropped (also on failure).
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn controller(url: &str, dir: &std::path::Path, changes: &str, log: &str) -> Child {
    Command::new(NEXTHOP)
        .args(["controller", "--redis", url, "--redis-fib", "core"])
        .args(["--lease", "1", "--changes-per-delta", &PER.to_string()])
        .args(["--duration", "60"])
        .arg("--fib")
        .arg(dir.join("fib"))
        .arg("--key-file")
        .arg(dir.join("key"))
        .arg("--changes")
        .arg(dir.join(changes))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(log)).expect("log file"))
        .spawn()
        .expect("spawn nexthop controller")
}

#[test]
fn standby_controller_takes_over_from_one_killed_mid_publish() {
    let redis = RedisServer::start().expect("redis-server");
    let url = redis.url();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(dir.join("key"), KEY).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut model: HashMap<[u8; 6], Action> = HashMap::new();
    let mut routes = String::new();
    for i in 0..BASE {
        let a = Action::Port((i % 5) as u16);
        let _ = writeln!(routes, "{} {a}", mac_text(&mac(i)));
        model.insert(mac(i), a);
    }
    std::fs::write(dir.join("routes.txt"), &routes).unwrap();
    let out = Command::new(NEXTHOP)
        .args(["fib", "build", "--key-type", "mac", "--check-bits", "16"])
        .arg("--routes")
        .arg(dir.join("routes.txt"))
        .arg("--out")
        .arg(dir.join("fib"))
        .output()
        .expect("fib build");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The active one's churn: every change sets one name to the next port,
    // so the final state tells exactly how many changes were applied.
    let churn: Vec<(u32, Action)> = (0..CHURN)
        .map(|k| (k % BASE, Action::Port((k / BASE + 1) as u16 % 7)))
        .collect();
    let mut text = String::new();
    for (i, a) in &churn {
        let _ = writeln!(text, "= {} {a}", mac_text(&mac(*i)));
    }
    std::fs::write(dir.join("churn.txt"), text).unwrap();
    // The standby's own changes: new names.
    let mut text = String::new();
    for i in BASE..BASE + 100 {
        let _ = writeln!(text, "+ {} 3", mac_text(&mac(i)));
    }
    std::fs::write(dir.join("adds.txt"), text).unwrap();

    let key = AuthKey::new(KEY.trim().as_bytes()).unwrap();
    let mut fcfg = RedisFollowerConfig::new(url.as_str(), "core", "e2e");
    fcfg.block = Duration::from_millis(100);
    let f = RedisFollower::start(&key, fcfg).unwrap();

    let mut procs = Procs(vec![controller(&url, dir, "churn.txt", "a.err")]);
    // Let A publish part of its churn, then start the standby and kill A.
    assert!(
        f.wait_for(Duration::from_secs(30), |s| s.version >= 4000),
        "the active controller published nothing: {:?}\n{}",
        f.stats(),
        std::fs::read_to_string(dir.join("a.err")).unwrap_or_default()
    );
    procs.0.push(controller(&url, dir, "adds.txt", "b.err"));
    std::thread::sleep(Duration::from_millis(300));
    procs.0[0].kill().unwrap();
    let killed = Instant::now();
    let at_kill = f.stats().version;
    assert!(
        at_kill < u64::from(CHURN),
        "A finished its churn before it was killed"
    );
    // B takes over and publishes its 100 adds after A's last whole entry.
    let b_log = || std::fs::read_to_string(dir.join("b.err")).unwrap_or_default();
    let mut active = None;
    let mut published = None;
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end && published.is_none() {
        let log = b_log();
        if active.is_none() && log.contains("active for FIB core") {
            active = Some(killed.elapsed());
        }
        published = log
            .lines()
            .find_map(|l| l.split("adds.txt: 100 changes published, version ").nth(1))
            .and_then(|v| v.trim().parse::<u64>().ok());
        std::thread::sleep(Duration::from_millis(10));
    }
    let (Some(handover), Some(last)) = (active, published) else {
        panic!("no handover: {:?}\n{}", f.stats(), b_log());
    };
    assert!(
        handover < Duration::from_secs(5),
        "handover took {handover:?}"
    );
    assert!(
        f.wait_for(Duration::from_secs(20), |s| s.version == last),
        "follower did not reach version {last}: {:?}",
        f.stats()
    );
    let s = f.stats();
    let a_changes = last - 100;
    assert_eq!(a_changes % PER, 0, "a half entry was applied: {s:?}");
    assert!(a_changes >= at_kill, "{s:?} (at the kill: {at_kill})");
    for (i, a) in churn.iter().take(a_changes as usize) {
        model.insert(mac(*i), a.clone());
    }
    for i in BASE..BASE + 100 {
        model.insert(mac(i), Action::Port(3));
    }
    let t = f.table().expect("table");
    for (name, a) in &model {
        assert_eq!(t.lookup(name), Some(a), "name {}", mac_text(name));
    }
    assert_eq!(
        s.bad_mac + s.malformed + s.replays + s.apply_errors,
        0,
        "{s:?}"
    );
}

/// `nexthop controller --redis --network ROUTES`: a network FIB of 4
/// columns from a routes file of 4 actions per name, a changes file that
/// moves one name's next hop at switch 2; a follower of column 2 (what
/// `nexthop run --fib core/2` uses) ends with switch 2's actions, one of
/// column 1 never sees a delta. A changes file with the wrong number of
/// actions is refused, naming its line, before anything is published.
#[test]
fn network_controller_publishes_a_column_per_switch() {
    let redis = RedisServer::start().expect("redis-server");
    let url = redis.url();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    std::fs::write(dir.join("key"), KEY).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let hop = |i: u32, s: u32| Action::Port(((i + s) % 3 + 1) as u16);
    let mut routes = String::from("# NAME and the action at switches 0..3\n");
    for i in 0..50 {
        let _ = writeln!(
            routes,
            "{} {} {} {} {}",
            mac_text(&mac(i)),
            hop(i, 0),
            hop(i, 1),
            hop(i, 2),
            hop(i, 3)
        );
    }
    std::fs::write(dir.join("net.txt"), &routes).unwrap();
    let moved = format!(
        "= {} {} {} 9 {}\n",
        mac_text(&mac(7)),
        hop(7, 0),
        hop(7, 1),
        hop(7, 3)
    );
    std::fs::write(dir.join("move.txt"), moved).unwrap();
    std::fs::write(
        dir.join("bad.txt"),
        format!("\n+ {} 1 2\n", mac_text(&mac(99))),
    )
    .unwrap();
    let run = |changes: &str, log: &str| {
        Command::new(NEXTHOP)
            .args(["controller", "--redis", &url, "--redis-fib", "core"])
            .args([
                "--network",
                "net.txt",
                "--key-type",
                "mac",
                "--key-file",
                "key",
            ])
            .args(["--changes", changes, "--duration", "3"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(log)).expect("log"))
            .status()
            .expect("nexthop controller")
    };
    assert!(!run("bad.txt", "bad.err").success());
    let bad = std::fs::read_to_string(dir.join("bad.err")).unwrap();
    assert!(
        bad.contains("bad.txt: line 2: '+' takes NAME and 4 actions"),
        "{bad}"
    );
    assert!(
        !bad.contains("waiting for the lease"),
        "a refused file reached Redis: {bad}"
    );

    let key = AuthKey::new(KEY.trim().as_bytes()).unwrap();
    let follow = |column: u32| {
        let mut c = RedisFollowerConfig::new(url.as_str(), "core", format!("sw{column}"));
        c.column = column;
        c.block = Duration::from_millis(100);
        RedisFollower::start(&key, c).unwrap()
    };
    let (f1, f2) = (follow(1), follow(2));
    let st = run("move.txt", "net.err");
    let log = std::fs::read_to_string(dir.join("net.err")).unwrap();
    assert!(st.success(), "{log}");
    assert!(log.contains("50 names, 4 columns"), "{log}");
    assert!(
        f2.wait_for(Duration::from_secs(20), |s| s.version == 1 && s.deltas == 1),
        "{:?}",
        f2.stats()
    );
    assert!(f1.wait_for(Duration::from_secs(20), |s| s.snapshots == 1));
    let (t1, t2) = (f1.table().unwrap(), f2.table().unwrap());
    for i in 0..50 {
        let want2 = if i == 7 { Action::Port(9) } else { hop(i, 2) };
        assert_eq!(t2.lookup(&mac(i)), Some(&want2), "switch 2, name {i}");
        assert_eq!(t1.lookup(&mac(i)), Some(&hop(i, 1)), "switch 1, name {i}");
    }
    let s1 = f1.stats();
    assert_eq!((s1.deltas, s1.version), (0, 0), "{s1:?}");
}
