//! A `redis-server` of a test's own: started on a free loopback port (or a
//! Unix socket, [`RedisServer::start_unix`]) with a temporary directory,
//! stopped (and the directory removed) when the guard drops, also when the
//! test fails. Needs `redis-server` on `PATH`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
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
    /// Listen on `dir/redis.sock` instead of the TCP port.
    unix: bool,
    /// More `redis-server` arguments (e.g. `--maxmemory 3mb`).
    extra: Vec<String>,
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
        let mut s = Self::unstarted(persist)?;
        s.port = free_port()?;
        s.spawn()?;
        Ok(s)
    }

    /// Start one listening only on the Unix socket [`Self::socket`] (no TCP
    /// port), with `extra` arguments after the defaults (no snapshots, no
    /// append-only file unless `extra` turns it on).
    pub fn start_unix(extra: &[&str]) -> io::Result<RedisServer> {
        let mut s = Self::unstarted(false)?;
        s.unix = true;
        s.extra = extra.iter().map(|a| a.to_string()).collect();
        s.spawn()?;
        Ok(s)
    }

    fn unstarted(persist: bool) -> io::Result<RedisServer> {
        let dir = std::env::temp_dir().join(format!(
            "nexthop-redis-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(RedisServer {
            child: None,
            port: 0,
            dir,
            persist,
            unix: false,
            extra: Vec::new(),
        })
    }

    /// The Unix socket path (listened on only by [`Self::start_unix`]).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    fn spawn(&mut self) -> io::Result<()> {
        let mut cmd = Command::new("redis-server");
        if self.unix {
            let _ = std::fs::remove_file(self.socket());
            cmd.args(["--port", "0", "--unixsocket"]).arg(self.socket());
        } else {
            cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
        }
        cmd.args(["--save", "", "--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("redis.log"));
        if self.persist {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd.args(&self.extra);
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
            format!("redis-server in {} did not answer PING", self.dir.display()),
        ))
    }

    fn ping(&self) -> bool {
        fn pong(mut s: impl Read + Write) -> bool {
            let mut b = [0u8; 7];
            s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n"
        }
        let t = Some(Duration::from_secs(1));
        if self.unix {
            UnixStream::connect(self.socket()).is_ok_and(|s| {
                let _ = s.set_read_timeout(t);
                pong(s)
            })
        } else {
            TcpStream::connect(("127.0.0.1", self.port)).is_ok_and(|s| {
                let _ = s.set_read_timeout(t);
                pong(s)
            })
        }
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

    /// Kill it (SIGKILL) and wait for it to exit (a Unix socket file is
    /// removed, so clients see the server gone).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.unix {
            let _ = std::fs::remove_file(self.socket());
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
