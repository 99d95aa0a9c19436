//! A `redis-server` of a test's own: started on a free loopback port with a
//! temporary directory, stopped (and the directory removed) when the guard
//! drops, also when the test fails. Needs `redis-server` on `PATH`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server` (see the module docs).
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    persist: bool,
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl RedisServer {
    /// Start one without persistence (a restart comes back empty).
    pub fn start() -> io::Result<RedisServer> {
        Self::start_with(false)
    }

    /// Start one; with `persist`, an append-only file synced on every write
    /// (a restart comes back with everything acknowledged).
    pub fn start_with(persist: bool) -> io::Result<RedisServer> {
        let dir = std::env::temp_dir().join(format!(
            "nexthop-redis-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir)?;
        let mut s = RedisServer {
            child: None,
            port: free_port()?,
            dir,
            persist,
        };
        s.spawn()?;
        Ok(s)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"));
        if self.persist {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.ping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("redis-server on port {} did not answer PING", self.port),
        ))
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut b = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n"
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its working directory (data files, `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kill it (SIGKILL) and wait for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port and directory (after [`Self::kill`]).
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill();
        self.spawn()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
