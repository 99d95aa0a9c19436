//! `nexthop sdf run --backend ovs`: the same built-in app, with Open
//! vSwitch as the fast path. nexthop listens for the bridge's OpenFlow 1.3
//! connection (`--ovs-listen`; `--ovs-bridge BR` points BR's controller at
//! it with `ovs-vsctl`), decides the packets OVS misses and installs the
//! decisions as flows, revoked by cookie when the app's state changes,
//! until a signal or `--duration`; then one summary line (or `--json`).
//!
//! Glue only: the codec, the translation and the controller are
//! `nexthop-openflow`'s (see its README for what is expressible and the
//! cookie layout).

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::sdf::App;
use nexthop_openflow::vsctl::{set_controller, TunnelSpec, Tunnels};
use nexthop_openflow::{
    serve, summary_fields, summary_line, BackendConfig, Controller, ServeConfig,
};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// Where decisions are installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// nexthop's own data plane (pcap files or interfaces).
    Nexthop,
    /// Open vSwitch, over OpenFlow 1.3.
    Ovs,
}

/// The `--backend` flags of `nexthop sdf run`.
#[derive(Debug, Args)]
pub struct OvsArgs {
    /// Where the app's decisions go: nexthop (this process forwards) or
    /// ovs (Open vSwitch forwards; --ovs-* flags).
    #[arg(long, value_name = "BACKEND", default_value = "nexthop")]
    backend: Backend,
    /// ovs: listen here for the bridge's OpenFlow connection (port 0: any
    /// free port, printed at start).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:6653")]
    ovs_listen: SocketAddr,
    /// ovs: make this bridge's controller --ovs-listen (ovs-vsctl
    /// set-controller, fail-mode secure, OpenFlow13, out-of-band).
    #[arg(long, value_name = "BR")]
    ovs_bridge: Option<String>,
    /// ovs: the app's ports, OpenFlow port numbers of the bridge (comma
    /// list).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    ovs_ports: Vec<u16>,
    /// ovs: seconds a flow may stay unused in OVS before it removes it
    /// (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    ovs_idle_timeout: u16,
    /// ovs: the switch port of an app's tunnel port whose `peer` property
    /// is PEER: OVS interface NAME of TYPE (patch, vxlan, gre, ...) with
    /// options:KEY=VAL, OpenFlow number = the app's port (repeat; needs
    /// --ovs-bridge).
    #[arg(long, value_name = "PEER=NAME,TYPE[,KEY=VAL...]", value_parser = parse_tunnel)]
    ovs_tunnel: Vec<(String, TunnelSpec)>,
    /// ovs: print a line on stderr for every revocation the switch
    /// confirms: `nexthop sdf: revocation removed_unix_ns=N states=S
    /// confirmed_us=U` (when the backend found the app's removed() calls,
    /// realtime clock; state ids; until the barrier reply). Built-in apps.
    #[arg(long)]
    ovs_log_revocations: bool,
}

fn parse_tunnel(s: &str) -> Result<(String, TunnelSpec), String> {
    let (peer, spec) = s
        .split_once('=')
        .filter(|(p, _)| !p.is_empty())
        .ok_or_else(|| format!("{s:?}: expected PEER=NAME,TYPE[,KEY=VAL...]"))?;
    Ok((peer.to_owned(), spec.parse()?))
}

impl OvsArgs {
    /// Whether `--backend ovs` was asked for.
    pub fn is_ovs(&self) -> bool {
        self.backend == Backend::Ovs
    }

    /// The same flags for `python -m nexthop.sdf run` (a Python app on
    /// this backend runs in the Python package's process).
    pub fn python_args(&self) -> Vec<String> {
        let mut a = vec![
            "--backend".to_owned(),
            "ovs".to_owned(),
            "--ovs-listen".to_owned(),
            self.ovs_listen.to_string(),
            "--ovs-idle-timeout".to_owned(),
            self.ovs_idle_timeout.to_string(),
        ];
        if let Some(br) = &self.ovs_bridge {
            a.extend(["--ovs-bridge".to_owned(), br.clone()]);
        }
        if !self.ovs_ports.is_empty() {
            let ports: Vec<String> = self.ovs_ports.iter().map(u16::to_string).collect();
            a.extend(["--ovs-ports".to_owned(), ports.join(",")]);
        }
        for (peer, t) in &self.ovs_tunnel {
            let mut spec = format!("{peer}={},{}", t.name, t.typ);
            for (k, v) in &t.options {
                spec.push_str(&format!(",{k}={v}"));
            }
            a.extend(["--ovs-tunnel".to_owned(), spec]);
        }
        a
    }
}

/// Run `app` with OVS as its fast path (module docs).
pub fn run(o: &OvsArgs, app: Box<dyn App>, duration: Option<f64>, json: bool) -> Result<()> {
    if o.ovs_ports.is_empty() {
        bail!("--backend ovs needs --ovs-ports LIST (the bridge's OpenFlow port numbers)");
    }
    if o.ovs_ports.contains(&0) {
        bail!("--ovs-ports: 0 is not an OpenFlow port number");
    }
    let deadline = match duration {
        Some(d) if d.is_finite() && d >= 0.0 => Some(Instant::now() + Duration::from_secs_f64(d)),
        Some(d) => bail!("--duration {d}: not a number of seconds"),
        None => None,
    };
    let listener =
        TcpListener::bind(o.ovs_listen).with_context(|| format!("listen on {}", o.ovs_listen))?;
    let addr = listener.local_addr()?;
    if let Some(br) = &o.ovs_bridge {
        set_controller(br, &format!("tcp:{addr}")).map_err(|e| anyhow!(e))?;
    } else if !o.ovs_tunnel.is_empty() {
        bail!("--ovs-tunnel needs --ovs-bridge (the bridge its ports are added to)");
    }
    let name = app.name().to_owned();
    let cfg = BackendConfig {
        ports: o.ovs_ports.clone(),
        idle_timeout: o.ovs_idle_timeout,
        ..BackendConfig::default()
    };
    let mut ctl = Controller::new(app, &cfg).map_err(|e| anyhow!("{e}"))?;
    if let Some(br) = &o.ovs_bridge {
        let specs: BTreeMap<String, TunnelSpec> = o.ovs_tunnel.iter().cloned().collect();
        ctl.set_port_mapper(Box::new(Tunnels::new(br, "peer", specs)));
    }
    let stop = StopFlag::install()?;
    eprintln!("nexthop sdf: app {name} on Open vSwitch, OpenFlow listening on {addr}");
    let done = || stop.is_raised() || deadline.is_some_and(|d| Instant::now() >= d);
    let serve_cfg = ServeConfig {
        log_revocations: o.ovs_log_revocations,
        ..ServeConfig::default()
    };
    serve(&mut ctl, &listener, serve_cfg, &done)?;
    let fields = summary_fields(ctl.counters(), ctl.app_counters());
    if json {
        let mut m = serde_json::Map::new();
        m.insert("app".into(), name.into());
        m.insert("backend".into(), "ovs".into());
        for (k, v) in &fields {
            m.insert((*k).into(), (*v).into());
        }
        println!("{}", serde_json::Value::Object(m));
    } else {
        println!("{}", summary_line(&name, &fields));
    }
    Ok(())
}

/// A Python app on this backend: `${NEXTHOP_PYTHON:-python3} -m
/// nexthop.sdf run --app APP.py --backend ovs ...` runs it in this
/// process's place (the Python package drives `nexthop-openflow`'s
/// controller through its bindings).
pub fn run_python(o: &OvsArgs, app: &str, duration: Option<f64>, json: bool) -> Result<()> {
    if o.ovs_log_revocations {
        bail!("--ovs-log-revocations: built-in apps only (not --app {app})");
    }
    let py = std::env::var_os("NEXTHOP_PYTHON").unwrap_or_else(|| "python3".into());
    let importable = Command::new(&py)
        .args(["-c", "from nexthop.sdf import run_ovs"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        bail!(
            "--app {app}: Python apps need the nexthop Python package, but `{} -c 'from nexthop.sdf import run_ovs'` failed (install the wheel built from python/, or point NEXTHOP_PYTHON at an interpreter that has it)",
            py.to_string_lossy()
        );
    }
    let mut cmd = Command::new(&py);
    cmd.args(["-m", "nexthop.sdf", "run", "--app", app]);
    cmd.args(o.python_args());
    if let Some(d) = duration {
        cmd.args(["--duration", &d.to_string()]);
    }
    if json {
        cmd.arg("--json");
    }
    // The Python process is the controller: it takes this process's
    // place, so that SIGINT/SIGTERM (and `ip netns exec`'s pid) reach the
    // run and its summary line.
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    bail!("{}: {e}", py.to_string_lossy())
}
