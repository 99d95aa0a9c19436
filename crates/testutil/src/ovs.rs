//! An Open vSwitch of a test's own: `ovsdb-server` and `ovs-vswitchd`
//! started in the foreground (so the guard holds their PIDs) with private
//! run, database, log and configuration directories (`OVS_RUNDIR` and
//! friends point into one temporary directory), inside a network
//! namespace (the caller's, or one of its own); stopped (by PID), the
//! directory removed and its own namespace deleted when the guard drops,
//! also when the test fails. Only the userspace datapath works without
//! the kernel module: bridges are made with `datapath_type=netdev`
//! ([`Ovs::add_bridge`]). That datapath leaves tap devices (`ovs-netdev`,
//! one per bridge) behind when it is killed, and a second instance in the
//! same namespace cannot create them: hence one namespace per instance,
//! whose deletion takes the taps with it. Needs root.
//!
//! [`Ovs::missing`] says why OVS cannot run here (no binaries), so a test
//! can skip with a reason.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The programs the guard runs.
const PROGRAMS: [&str; 5] = [
    "ovsdb-server",
    "ovs-vswitchd",
    "ovsdb-tool",
    "ovs-vsctl",
    "ovs-ofctl",
];

/// Where the database schema of Debian's `openvswitch-common` lives.
const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// `name` on `PATH`, or in the sbin directories a test's `PATH` may lack.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A running Open vSwitch (see the module docs).
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
    netns: String,
    /// The namespace is the guard's, deleted when it drops.
    own_ns: bool,
    db: Option<Child>,
    vswitchd: Option<Child>,
}

impl Ovs {
    /// Why OVS cannot be started here (a program or the schema missing),
    /// or `None` when it can.
    pub fn missing() -> Option<String> {
        for p in PROGRAMS {
            if find_program(p).is_none() {
                return Some(format!(
                    "{p} not found (install openvswitch-switch: scripts/setup.sh)"
                ));
            }
        }
        if !Path::new(SCHEMA).is_file() {
            return Some(format!("{SCHEMA} not found (openvswitch-common)"));
        }
        None
    }

    /// Start `ovsdb-server` (with a fresh database) and `ovs-vswitchd` in
    /// network namespace `netns`, or in a new namespace of the guard's own
    /// when `None`.
    pub fn start(netns: Option<&str>) -> io::Result<Ovs> {
        if let Some(why) = Self::missing() {
            return Err(io::Error::new(io::ErrorKind::NotFound, why));
        }
        let id = format!("{}-{:x}", std::process::id(), rand::random::<u32>());
        let dir = std::env::temp_dir().join(format!("nexthop-ovs-{id}"));
        std::fs::create_dir_all(&dir)?;
        let mut ovs = Ovs {
            dir,
            netns: netns.map_or_else(|| format!("nh-ovs-{id}"), str::to_owned),
            own_ns: netns.is_none(),
            db: None,
            vswitchd: None,
        };
        if ovs.own_ns {
            let st = Command::new("ip")
                .args(["netns", "add", &ovs.netns])
                .status()?;
            if !st.success() {
                ovs.own_ns = false;
                return Err(io::Error::other(format!(
                    "ip netns add {}: {st}",
                    ovs.netns
                )));
            }
        }
        let db = ovs.dir.join("conf.db");
        ovs.run("ovsdb-tool", &["create", &db.to_string_lossy(), SCHEMA])?;
        let mut c = ovs.command("ovsdb-server")?;
        c.arg(&db)
            .arg(format!("--remote=punix:{}", ovs.socket().display()))
            .arg(format!(
                "--log-file={}",
                ovs.dir.join("ovsdb-server.log").display()
            ))
            .arg(format!(
                "--unixctl={}",
                ovs.dir.join("ovsdb-server.ctl").display()
            ));
        ovs.db = Some(c.spawn()?);
        ovs.wait_until("ovsdb-server socket", |o| o.socket().exists())?;
        ovs.vsctl(&["--no-wait", "init"])?;
        ovs.start_vswitchd()?;
        Ok(ovs)
    }

    /// The network namespace it runs in.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Its private directory (databases, sockets, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The database socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    /// The environment a process needs to reach this instance with the
    /// OVS tools (`ovs-vsctl`, `ovs-ofctl`).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let d = self.dir.to_string_lossy().into_owned();
        ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"]
            .into_iter()
            .map(|k| (k, d.clone()))
            .collect()
    }

    /// `ovs-vswitchd`'s log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("ovs-vswitchd.log")).unwrap_or_default()
    }

    fn command(&self, program: &str) -> io::Result<Command> {
        let path = find_program(program).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{program} not found"))
        })?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns]).arg(path);
        c.envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Ok(c)
    }

    /// Run `program ARGS` to completion: its stdout, or an error with its
    /// stderr.
    pub fn run(&self, program: &str, args: &[&str]) -> io::Result<String> {
        let mut c = self.command(program)?;
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        let Output {
            status,
            stdout,
            stderr,
        } = c.output()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "{program} {}: {status}: {}",
                args.join(" "),
                String::from_utf8_lossy(&stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// `ovs-vsctl --timeout=20 ARGS` (waits for `ovs-vswitchd` to apply
    /// the change unless `--no-wait` is among `args`).
    pub fn vsctl(&self, args: &[&str]) -> io::Result<String> {
        let mut all = vec!["--timeout=20"];
        all.extend_from_slice(args);
        self.run("ovs-vsctl", &all)
    }

    /// `ovs-ofctl -O OpenFlow13 ARGS`.
    pub fn ofctl(&self, args: &[&str]) -> io::Result<String> {
        let mut all = vec!["-O", "OpenFlow13"];
        all.extend_from_slice(args);
        self.run("ovs-ofctl", &all)
    }

    /// The flows of `bridge`, one `ovs-ofctl dump-flows` line each
    /// (statistics removed: duration, packet and byte counts, idle age),
    /// sorted.
    pub fn flows(&self, bridge: &str) -> io::Result<Vec<String>> {
        let out = self.ofctl(&["dump-flows", bridge])?;
        let mut v: Vec<String> = out
            .lines()
            .filter(|l| l.contains("actions="))
            .map(|l| {
                l.split([',', ' '])
                    .filter(|f| {
                        !f.is_empty()
                            && ![
                                "duration=",
                                "n_packets=",
                                "n_bytes=",
                                "idle_age=",
                                "hard_age=",
                            ]
                            .iter()
                            .any(|s| f.starts_with(s))
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        v.sort();
        Ok(v)
    }

    /// A userspace (`netdev`) bridge `name`, secure fail mode (no flows
    /// but the controller's), OpenFlow 1.3 only.
    pub fn add_bridge(&self, name: &str) -> io::Result<()> {
        self.vsctl(&[
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            "datapath_type=netdev",
            "fail-mode=secure",
            "protocols=OpenFlow13",
        ])
        .map(drop)
    }

    /// Add interface `iface` (already in OVS's namespace) to `bridge` as
    /// OpenFlow port `ofport`.
    pub fn add_port(&self, bridge: &str, iface: &str, ofport: u16) -> io::Result<()> {
        let req = format!("ofport_request={ofport}");
        self.vsctl(&[
            "add-port",
            bridge,
            iface,
            "--",
            "set",
            "interface",
            iface,
            &req,
        ])
        .map(drop)
    }

    /// Kill `ovs-vswitchd` (SIGKILL), as a crash would; the database and
    /// the configuration stay.
    pub fn kill_vswitchd(&mut self) {
        if let Some(mut c) = self.vswitchd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start `ovs-vswitchd` (again, after [`Self::kill_vswitchd`]): it
    /// reads the bridges from the database and reconnects to their
    /// controllers.
    pub fn start_vswitchd(&mut self) -> io::Result<()> {
        self.kill_vswitchd();
        let pidfile = self.dir.join("ovs-vswitchd.pid");
        let _ = std::fs::remove_file(&pidfile);
        let mut c = self.command("ovs-vswitchd")?;
        c.arg(format!("unix:{}", self.socket().display()))
            .arg(format!("--pidfile={}", pidfile.display()))
            .arg(format!(
                "--log-file={}",
                self.dir.join("ovs-vswitchd.log").display()
            ))
            .arg(format!(
                "--unixctl={}",
                self.dir.join("ovs-vswitchd.ctl").display()
            ));
        self.vswitchd = Some(c.spawn()?);
        self.wait_until("ovs-vswitchd pidfile", |o| {
            o.dir.join("ovs-vswitchd.pid").exists()
        })
    }

    fn wait_until(&mut self, what: &str, ready: impl Fn(&Ovs) -> bool) -> io::Result<()> {
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if ready(self) {
                return Ok(());
            }
            for c in [&mut self.db, &mut self.vswitchd].into_iter().flatten() {
                if let Ok(Some(s)) = c.try_wait() {
                    return Err(io::Error::other(format!(
                        "{what}: a process of {} exited: {s}",
                        self.dir.display()
                    )));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} in {} not ready after 20 s", self.dir.display()),
        ))
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        self.kill_vswitchd();
        if let Some(mut c) = self.db.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.own_ns {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.netns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_starts_with_no_flows_and_the_guard_cleans_up() {
        if let Some(why) = Ovs::missing() {
            eprintln!("SKIP: {why}");
            return;
        }
        // SAFETY: (1) geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: a userspace bridge's tap port needs root");
            return;
        }
        let ovs = Ovs::start(None).expect("start OVS");
        let dir = ovs.dir().to_path_buf();
        ovs.add_bridge("nhtest0").expect("bridge");
        assert!(ovs.flows("nhtest0").unwrap().is_empty());
        ovs.ofctl(&["add-flow", "nhtest0", "priority=5,actions=drop"])
            .unwrap();
        assert_eq!(ovs.flows("nhtest0").unwrap().len(), 1);
        let ns = ovs.netns().to_owned();
        drop(ovs);
        assert!(!dir.exists());
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(!String::from_utf8_lossy(&list.stdout).contains(&ns));
    }
}
