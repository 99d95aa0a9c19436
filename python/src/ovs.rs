//! `nexthop.sdf.run_ovs`: a Python app with Open vSwitch as its fast path
//! (`python -m nexthop.sdf run --app APP.py --backend ovs`). The app runs
//! behind `nexthop-openflow`'s controller, exactly as a built-in app does
//! under `nexthop sdf run --backend ovs`: misses arrive as packet-ins,
//! decisions become flows, `removed()` deletes them by cookie. Ports the
//! app adds (its tunnels) become OVS ports (`tunnels`, by their `peer`
//! property).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use nexthop_dataplane::live::StopFlag;
use nexthop_openflow::vsctl::{set_controller, TunnelSpec, Tunnels};
use nexthop_openflow::{
    serve, summary_fields, summary_line, BackendConfig, Controller, ServeConfig,
};
use nexthop_sdf::app::App;
use nexthop_sdf::PortId;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::sdf::PyApp;

/// Run `app` as the controller of an Open vSwitch bridge until `duration`
/// seconds pass or SIGINT/SIGTERM (handlers installed by this call;
/// restore Python's after). `ports`: the bridge's OpenFlow port numbers
/// the app sees; `listen`: where the bridge connects (`bridge`: point its
/// controller there with `ovs-vsctl`); `tunnels`: `(PEER,
/// "NAME,TYPE[,KEY=VAL...]")`, the OVS port made for an app port whose
/// `peer` property is PEER (needs `bridge`). Prints the listening line on
/// stderr; returns the counters and `summary` (the line `nexthop sdf run
/// --backend ovs` prints).
#[pyfunction]
#[pyo3(signature = (
    app, ports, listen = "127.0.0.1:6653", bridge = None, idle_timeout = 10,
    tunnels = Vec::new(), duration = None, label = None
))]
#[allow(clippy::too_many_arguments)]
pub fn run_ovs<'py>(
    py: Python<'py>,
    app: Bound<'py, PyAny>,
    ports: Vec<PortId>,
    listen: &str,
    bridge: Option<String>,
    idle_timeout: u16,
    tunnels: Vec<(String, String)>,
    duration: Option<f64>,
    label: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    if ports.is_empty() || ports.contains(&0) {
        return Err(PyValueError::new_err(
            "--backend ovs needs --ovs-ports LIST (the bridge's OpenFlow port numbers, not 0)",
        ));
    }
    let deadline = match duration {
        Some(d) if (0.0..1e9).contains(&d) => Some(Instant::now() + Duration::from_secs_f64(d)),
        Some(d) => {
            return Err(PyValueError::new_err(format!(
                "--duration {d}: expected a number of seconds"
            )))
        }
        None => None,
    };
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| PyValueError::new_err(format!("--ovs-listen {listen}: {e}")))?;
    let mut specs = BTreeMap::new();
    for (peer, spec) in &tunnels {
        let s: TunnelSpec = spec
            .parse()
            .map_err(|e| PyValueError::new_err(format!("--ovs-tunnel {peer}={spec}: {e}")))?;
        specs.insert(peer.clone(), s);
    }
    if bridge.is_none() && !specs.is_empty() {
        return Err(PyValueError::new_err(
            "--ovs-tunnel needs --ovs-bridge (the bridge its ports are added to)",
        ));
    }
    let app = PyApp::new(app)?;
    let name = label.unwrap_or_else(|| app.name().to_owned());
    let listener = TcpListener::bind(addr)
        .map_err(|e| PyOSError::new_err(format!("listen on {addr}: {e}")))?;
    let addr = listener.local_addr()?;
    if let Some(br) = &bridge {
        set_controller(br, &format!("tcp:{addr}")).map_err(PyOSError::new_err)?;
    }
    let cfg = BackendConfig {
        ports,
        idle_timeout,
        ..BackendConfig::default()
    };
    let mut ctl = Controller::new(app, &cfg).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(br) = &bridge {
        ctl.set_port_mapper(Box::new(Tunnels::new(br, "peer", specs)));
    }
    let stop = StopFlag::install()
        .map_err(|e| PyOSError::new_err(format!("installing signal handlers: {e}")))?;
    eprintln!("nexthop sdf: app {name} on Open vSwitch, OpenFlow listening on {addr}");
    // The app takes the GIL for each call: release it while serving.
    let served = py.allow_threads(|| {
        let done = || stop.is_raised() || deadline.is_some_and(|d| Instant::now() >= d);
        serve(&mut ctl, &listener, ServeConfig::default(), &done)
    });
    served.map_err(|e| PyOSError::new_err(format!("serving {addr}: {e}")))?;
    let fields = summary_fields(ctl.counters(), ctl.app_counters());
    let d = PyDict::new(py);
    d.set_item("app", &name)?;
    d.set_item("backend", "ovs")?;
    for (k, v) in &fields {
        d.set_item(*k, *v)?;
    }
    d.set_item("mapped", ctl.mapped_ports())?;
    d.set_item("summary", summary_line(&name, &fields))?;
    Ok(d)
}
