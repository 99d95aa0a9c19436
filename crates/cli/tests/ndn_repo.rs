//! `nexthop ndn repo put|get|delete|list` against a real `redis-server`
//! started on a temporary Unix socket (and stopped, also on failure).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NEXTHOP: &str = env!("CARGO_BIN_EXE_nexthop");

struct Redis {
    child: Child,
    dir: PathBuf,
    sock: PathBuf,
}

impl Redis {
    fn start(tag: &str, extra: &[&str]) -> Redis {
        let dir =
            std::env::temp_dir().join(format!("nexthop-ndn-repo-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&sock)
            .args(["--save", "", "--dir"])
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not open {sock:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, dir, sock }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn repo(sock: &Path, args: &[&str]) -> Output {
    Command::new(NEXTHOP)
        .args(["ndn", "repo", "--redis"])
        .arg(sock)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn put_get_list_delete_byte_compared() {
    let r = Redis::start("cli", &[]);
    for (i, len) in [1usize, 8000, 8001, 2 << 20].into_iter().enumerate() {
        let content: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
        let f = r.dir.join(format!("in{i}"));
        std::fs::write(&f, &content).unwrap();
        let name = format!("/demo/file{i}");
        let out = ok(&repo(
            &r.sock,
            &["put", "--prefix", &name, f.to_str().unwrap()],
        ));
        let segs = len.div_ceil(8000);
        assert_eq!(
            out.trim(),
            format!("stored {name} segments={segs} bytes={len}")
        );
        assert_eq!(repo(&r.sock, &["get", &name]).stdout, content);
        let o = r.dir.join(format!("out{i}"));
        ok(&repo(&r.sock, &["get", &name, "-o", o.to_str().unwrap()]));
        assert_eq!(std::fs::read(&o).unwrap(), content);
    }
    let listed = ok(&repo(&r.sock, &["list", "/demo/file2"]));
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        ["/demo/file2/seg=0", "/demo/file2/seg=1"]
    );
    assert_eq!(
        ok(&repo(&r.sock, &["delete", "/demo/file2"])).trim(),
        "deleted 2"
    );
    let o = repo(&r.sock, &["get", "/demo/file2"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 404"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        ok(&repo(&r.sock, &["list", "/demo"])).lines().count(),
        1 + 1 + (2usize << 20).div_ceil(8000)
    );
}

#[test]
fn failures_carry_a_status() {
    let r = Redis::start("clibad", &[]);
    let o = repo(&r.sock, &["list", "/a//b"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 400"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let down = r.dir.join("absent.sock");
    let o = repo(&down, &["list", "/"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("status 503"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
