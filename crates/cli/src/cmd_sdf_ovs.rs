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
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::sdf::App;
use nexthop_openflow::{serve, BackendConfig, Controller, Counters, ServeConfig};
use nexthop_sdf::app::AppCounters;

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
}

impl OvsArgs {
    /// Whether `--backend ovs` was asked for.
    pub fn is_ovs(&self) -> bool {
        self.backend == Backend::Ovs
    }
}

/// Point `bridge`'s controller at `addr` (OpenFlow 1.3 only, secure fail
/// mode: no flows but ours; out-of-band: no hidden in-band flows; retries
/// at most a second apart, so a restart reconnects at once).
fn set_controller(bridge: &str, addr: SocketAddr) -> Result<()> {
    let target = format!("tcp:{addr}");
    let out = Command::new("ovs-vsctl")
        .args(["--timeout=20", "set-controller", bridge, &target, "--"])
        .args(["set", "bridge", bridge, "fail-mode=secure"])
        .args(["protocols=OpenFlow13", "--"])
        .args(["set", "controller", bridge, "connection-mode=out-of-band"])
        .arg("max_backoff=1000")
        .output()
        .context("ovs-vsctl (install openvswitch-switch)")?;
    if !out.status.success() {
        bail!(
            "ovs-vsctl set-controller {bridge} {target}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
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
        set_controller(br, addr)?;
    }
    let name = app.name().to_owned();
    let cfg = BackendConfig {
        ports: o.ovs_ports.clone(),
        idle_timeout: o.ovs_idle_timeout,
        ..BackendConfig::default()
    };
    let mut ctl = Controller::new(app, &cfg).map_err(|e| anyhow!("{e}"))?;
    let stop = StopFlag::install()?;
    eprintln!("nexthop sdf: app {name} on Open vSwitch, OpenFlow listening on {addr}");
    let done = || stop.is_raised() || deadline.is_some_and(|d| Instant::now() >= d);
    serve(&mut ctl, &listener, ServeConfig::default(), &done)?;
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

/// The counters of a run, named as in the summary.
fn summary_fields(c: &Counters, a: &AppCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("connections", c.connections),
        ("reconnects", c.reconnects),
        ("flushed_flows", c.flushed_flows),
        ("packet_ins", c.packet_ins),
        ("bad_packet_ins", c.bad_packet_ins),
        ("app_calls", a.app_calls),
        ("app_drops", a.drops.total()),
        ("flows_installed", c.flows_installed),
        ("flows_present", c.flows_present),
        ("not_installed", c.not_installed()),
        ("not_installed_bits", c.not_installed_bits),
        ("not_installed_length", c.not_installed_length),
        ("not_installed_actions", c.not_installed_actions),
        ("not_installed_states", c.not_installed_states),
        ("not_cached", c.not_cached),
        ("packet_outs", c.packet_outs),
        ("revoked_states", c.revoked_states),
        ("revoked_flows", c.revoked_flows),
        ("deletes", c.deletes),
        ("flows_expired", c.flows_expired),
        ("errors", c.errors),
        ("refused_flows", c.refused_flows),
        ("barriers", c.barriers),
        ("dropped_waiting", c.dropped_waiting),
        ("revocations_confirmed", c.revocations_confirmed),
        (
            "revocation_us_mean",
            c.revocation_us_sum
                .checked_div(c.revocations_confirmed)
                .unwrap_or(0),
        ),
        ("revocation_us_max", c.revocation_us_max),
        ("decode_errors", c.decode_errors),
    ]
}

fn summary_line(app: &str, fields: &[(&str, u64)]) -> String {
    let mut s = format!("nexthop sdf: app={app} backend=ovs");
    for (k, v) in fields {
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_counter_once() {
        let c = Counters {
            revocations_confirmed: 2,
            revocation_us_sum: 300,
            reconnects: 1,
            ..Counters::default()
        };
        let f = summary_fields(&c, &AppCounters::default());
        let line = summary_line("l2switch", &f);
        assert!(line.starts_with("nexthop sdf: app=l2switch backend=ovs "));
        assert!(line.contains(" reconnects=1 ") && line.contains(" revocation_us_mean=150 "));
        let mut names: Vec<_> = f.iter().map(|(k, _)| *k).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), f.len());
    }
}
