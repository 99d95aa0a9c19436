//! `nexthop.sdf`: software-defined forwarding apps written in Python.
//!
//! A Python app is an object with `on_packet(self, pkt, ctl)` (and
//! optionally `on_tick(self, ctl)`); [`PyApp`] wraps it as a Rust
//! [`App`] that calls it under the GIL. The `InPkt` and `Control` objects
//! handed to Python point at Rust values that live only for the call: a
//! shared flag is cleared when the call returns, and every later use of
//! them raises `RuntimeError` instead of touching freed memory. A Python
//! exception (or a non-`None` return) becomes an [`AppError`]: the packet
//! is dropped and counted, never a panic.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use nexthop_sdf::app::{
    App, AppError, Control, ControlFilter, DropReason, InPkt, L2Config, L2Switch, OutPkt, PortKind,
    Ports, Stats, Switch,
};
use nexthop_sdf::{Config, PortId, Primitive, StateId};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

// `run_pcap` and `run_live` (an app or slices through the data plane).
#[path = "sdf_run.rs"]
mod run;

fn api_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn stale(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "this {what} belongs to an app call that has returned; it cannot be used any more"
    ))
}

/// A piece of app state decisions register (`Control.new_state_id`).
#[pyclass(name = "StateId", module = "nexthop.sdf", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyStateId(StateId);

#[pymethods]
impl PyStateId {
    /// The id's number (never 0).
    #[getter]
    fn value(&self) -> u64 {
        self.0.get()
    }

    fn __repr__(&self) -> String {
        format!("StateId({})", self.0.get())
    }
}

enum InPktRef {
    /// The packet of the running `on_packet` call.
    Borrowed(*mut InPkt, Rc<Cell<bool>>),
    /// A synthetic packet for a proactive decision (`Control.new_in_pkt`);
    /// `None` once pushed. Boxed: a packet is several hundred bytes, the
    /// borrowed case two pointers.
    Owned(Option<Box<InPkt>>),
}

/// The packet the app decides for (the paper's InPkt).
#[pyclass(name = "InPkt", module = "nexthop.sdf", unsendable)]
pub struct PyInPkt(InPktRef);

impl PyInPkt {
    fn with<R>(&mut self, f: impl FnOnce(&mut InPkt) -> R) -> PyResult<R> {
        match &mut self.0 {
            InPktRef::Borrowed(p, alive) => {
                if !alive.get() {
                    return Err(stale("InPkt"));
                }
                // SAFETY: `alive` is true only while the `on_packet` call
                // that created this object runs (PyApp::on_packet clears it
                // before returning), and during that call the InPkt behind
                // `p` is exclusively lent to the app; Python holds the GIL
                // and this object is `unsendable`, so no other thread uses it.
                Ok(f(unsafe { &mut **p }))
            }
            InPktRef::Owned(Some(p)) => Ok(f(p)),
            InPktRef::Owned(None) => Err(PyRuntimeError::new_err(
                "this InPkt was already pushed with Control.push",
            )),
        }
    }
}

#[pymethods]
impl PyInPkt {
    /// The port the packet came in on (reading it does not mark it).
    #[getter]
    fn in_port(&mut self) -> PyResult<PortId> {
        self.with(|p| p.in_port())
    }

    /// The whole frame (reading it does not mark anything).
    #[getter]
    fn data<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.with(|p| PyBytes::new(py, p.data()))
    }

    fn __len__(&mut self) -> PyResult<usize> {
        self.with(|p| p.len())
    }

    /// The decision depends on header bits `bit_pos .. bit_pos + length`.
    fn mark(&mut self, bit_pos: usize, length: usize) -> PyResult<()> {
        self.with(|p| p.mark(bit_pos, length))?.map_err(api_err)
    }

    /// The decision depends on the ingress port; returns it.
    fn mark_ingress(&mut self) -> PyResult<PortId> {
        self.with(|p| p.mark_ingress())
    }

    /// Take back a mark.
    fn unmark(&mut self, bit_pos: usize, length: usize) -> PyResult<()> {
        self.with(|p| p.unmark(bit_pos, length))?.map_err(api_err)
    }

    /// Take back every mark.
    fn clear(&mut self) -> PyResult<()> {
        self.with(|p| p.clear())
    }

    /// Read (and mark) the big-endian field of `length` <= 64 bits at `bit_pos`.
    fn field(&mut self, bit_pos: usize, length: usize) -> PyResult<u64> {
        self.with(|p| p.field(bit_pos, length))?.map_err(api_err)
    }

    /// Read (and mark) `length` bytes at byte `start`.
    fn bytes<'py>(
        &mut self,
        py: Python<'py>,
        start: usize,
        length: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.with(|p| p.bytes(start, length).map(|b| PyBytes::new(py, b)))?
            .map_err(api_err)
    }

    /// A copy of this packet to send: no destinations, no registrations.
    fn new_out_pkt(&mut self) -> PyResult<PyOutPkt> {
        self.with(|p| PyOutPkt {
            ttl: Primitive::ip_ttl_for(p.data()),
            out: p.new_out_pkt(),
        })
    }

    /// Send `out`; `final` (default) ends the decision.
    #[pyo3(signature = (out, r#final = true))]
    fn send(&mut self, out: PyRef<'_, PyOutPkt>, r#final: bool) -> PyResult<()> {
        let o = out.out.clone();
        self.with(|p| p.send(o, r#final))?.map_err(api_err)
    }
}

/// A packet to send (the paper's OutPkt): a copy of the in-packet with
/// destinations, registrations, rewrites and primitives, or with
/// `OutPkt(frame)` a packet the app made up (never cached).
#[pyclass(name = "OutPkt", module = "nexthop.sdf")]
pub struct PyOutPkt {
    out: OutPkt,
    ttl: Option<Primitive>,
}

#[pymethods]
impl PyOutPkt {
    #[new]
    fn new(frame: &[u8]) -> PyOutPkt {
        PyOutPkt {
            out: OutPkt::raw(frame.to_vec()),
            ttl: None,
        }
    }

    /// The decision depended on `state`.
    fn register(&mut self, state: PyStateId) {
        self.out.register(state.0);
    }

    /// Send to `port`.
    fn add_destination(&mut self, port: PortId) {
        self.out.add_destination(port);
    }

    /// Also send to the control port.
    // The paper's (and the Rust OutPkt's) name, not a conversion.
    #[allow(clippy::wrong_self_convention)]
    fn to_controller(&mut self) {
        self.out.to_controller();
    }

    /// Forget destinations, registrations, rewrites and primitives.
    fn clear(&mut self) {
        self.out.clear();
    }

    /// Overwrite the header at byte `at` with `data`.
    fn set_bytes(&mut self, at: usize, data: &[u8]) -> PyResult<()> {
        self.out.set_bytes(at, data).map_err(api_err)
    }

    /// Decrement the IPv4 TTL (with the header checksum) or the IPv6 hop
    /// limit; a packet whose TTL is 0 or 1 is dropped instead.
    fn dec_ttl(&mut self) -> PyResult<()> {
        let p = self
            .ttl
            .ok_or_else(|| PyValueError::new_err("dec_ttl: the packet is not IPv4 or IPv6"))?;
        self.out.push_primitive(p).map_err(api_err)
    }

    /// The destinations so far.
    #[getter]
    fn destinations(&self) -> Vec<PortId> {
        self.out.destinations().to_vec()
    }

    /// The registered state ids.
    #[getter]
    fn states(&self) -> Vec<PyStateId> {
        self.out.states().iter().map(|&s| PyStateId(s)).collect()
    }
}

/// What the app may do besides deciding (the paper's Control calls),
/// valid during one app call.
#[pyclass(name = "Control", module = "nexthop.sdf", unsendable)]
pub struct PyControl {
    ptr: *mut Control<'static>,
    alive: Rc<Cell<bool>>,
}

impl PyControl {
    fn with<R>(&mut self, f: impl FnOnce(&mut Control<'static>) -> R) -> PyResult<R> {
        if !self.alive.get() {
            return Err(stale("Control"));
        }
        // SAFETY: `alive` is true only while the app call that created this
        // object runs (cleared by `call_app` before it returns); during the
        // call the Control behind `ptr` is exclusively lent to the app, and
        // its true lifetime outlives the call. The object is `unsendable`
        // and used under the GIL, so no other thread touches it.
        Ok(f(unsafe { &mut *self.ptr }))
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("entries", s.entries)?;
    d.set_item("masks", s.masks)?;
    d.set_item("state_ids", s.state_ids)?;
    d.set_item("app_calls", s.app.app_calls)?;
    d.set_item("cacheable", s.app.cacheable)?;
    d.set_item("uncacheable", s.app.uncacheable)?;
    d.set_item("install_errors", s.app.install_errors)?;
    d.set_item("proactive", s.app.proactive)?;
    d.set_item("drops", s.app.drops.total())?;
    let drops = PyDict::new(py);
    for (r, n) in s.app.drops.iter() {
        drops.set_item(r.name(), n)?;
    }
    d.set_item("drop_reasons", drops)?;
    Ok(d)
}

#[pymethods]
impl PyControl {
    /// A new piece of state for decisions to register.
    fn new_state_id(&mut self) -> PyResult<PyStateId> {
        self.with(|c| c.new_state_id())?
            .map(PyStateId)
            .map_err(api_err)
    }

    /// The state changed: revoke the cached decisions that registered it.
    /// Returns how many were revoked; the id is dead afterwards.
    fn removed(&mut self, state: PyStateId) -> PyResult<usize> {
        self.with(|c| c.removed(state.0))
    }

    /// Every port number, sorted.
    fn get_ports(&mut self) -> PyResult<Vec<PortId>> {
        self.with(|c| c.get_ports())
    }

    /// A new tunnel port; returns its number.
    fn add_port(&mut self) -> PyResult<PortId> {
        self.with(|c| c.add_port(PortKind::Tunnel))?
            .map_err(api_err)
    }

    /// Delete port `port`.
    fn del_port(&mut self, port: PortId) -> PyResult<()> {
        self.with(|c| c.del_port(port))?.map_err(api_err)
    }

    /// Set property `key` of port `port`.
    fn set_properties(&mut self, port: PortId, key: &str, value: &str) -> PyResult<()> {
        self.with(|c| c.set_properties(port, key, value))?
            .map_err(api_err)
    }

    /// The properties of port `port`.
    fn get_properties<'py>(
        &mut self,
        py: Python<'py>,
        port: PortId,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.with(|c| -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            for (k, v) in c.get_properties(port).map_err(api_err)? {
                d.set_item(k, v)?;
            }
            Ok(d)
        })?
    }

    /// The switch's counters now, as a dict.
    fn get_stats<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(|c| c.get_stats())?;
        stats_dict(py, &s)
    }

    /// The switch's clock in seconds.
    fn now(&mut self) -> PyResult<f64> {
        self.with(|c| c.now().as_secs_f64())
    }

    /// A synthetic packet with header `header` arriving on `in_port`, for
    /// a proactive decision: decide on it, then `push` it.
    fn new_in_pkt(&mut self, in_port: PortId, header: &[u8]) -> PyResult<PyInPkt> {
        let p = self.with(|c| c.new_in_pkt(in_port, header.to_vec()))?;
        Ok(PyInPkt(InPktRef::Owned(Some(Box::new(p)))))
    }

    /// Install the decision made on a synthetic packet; returns whether it
    /// was cached.
    fn push(&mut self, pkt: &mut PyInPkt) -> PyResult<bool> {
        let p = match &mut pkt.0 {
            InPktRef::Owned(p) => p
                .take()
                .ok_or_else(|| PyRuntimeError::new_err("this InPkt was already pushed"))?,
            InPktRef::Borrowed(..) => {
                return Err(PyValueError::new_err(
                    "push takes a packet from Control.new_in_pkt, not the packet being decided",
                ))
            }
        };
        self.with(|c| c.push(*p))?.map_err(api_err)
    }
}

/// Which missed frames an app counts as control traffic: those of one of
/// `ethertypes` (the EtherType after at most one 802.1Q tag) or sent to
/// one of `dst_macs` (6-byte addresses). An app's `control_filter(self)`
/// returns one (or None: ARP, the default); the switch asks once, when it
/// starts, and its workers classify each miss with it: control misses
/// use the control queue, served with weighted priority over data misses.
#[pyclass(name = "ControlFilter", module = "nexthop.sdf", frozen)]
#[derive(Clone)]
pub struct PyControlFilter(ControlFilter);

#[pymethods]
impl PyControlFilter {
    #[new]
    #[pyo3(signature = (ethertypes = vec![ControlFilter::ARP], dst_macs = Vec::new()))]
    fn new(ethertypes: Vec<u16>, dst_macs: Vec<Vec<u8>>) -> PyResult<PyControlFilter> {
        let dst_macs = dst_macs
            .into_iter()
            .map(|m| {
                <[u8; 6]>::try_from(m.as_slice()).map_err(|_| {
                    PyValueError::new_err(format!(
                        "dst_macs: a MAC address is 6 bytes, not {}",
                        m.len()
                    ))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyControlFilter(ControlFilter {
            ethertypes,
            dst_macs,
        }))
    }

    /// The filter that classifies no frame as control (every miss is data).
    #[staticmethod]
    fn none() -> PyControlFilter {
        PyControlFilter(ControlFilter::none())
    }

    /// The control EtherTypes.
    #[getter]
    fn ethertypes(&self) -> Vec<u16> {
        self.0.ethertypes.clone()
    }

    /// The control destination MAC addresses.
    #[getter]
    fn dst_macs<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.0
            .dst_macs
            .iter()
            .map(|m| PyBytes::new(py, m))
            .collect()
    }

    /// Whether `frame` (any bytes) is control.
    fn matches(&self, frame: &[u8]) -> bool {
        self.0.matches(frame)
    }

    fn __repr__(&self) -> String {
        let types: Vec<String> = self
            .0
            .ethertypes
            .iter()
            .map(|t| format!("0x{t:04x}"))
            .collect();
        let macs: Vec<String> = self
            .0
            .dst_macs
            .iter()
            .map(|m| {
                format!(
                    "b'{}'",
                    m.iter().map(|b| format!("\\x{b:02x}")).collect::<String>()
                )
            })
            .collect();
        format!(
            "ControlFilter(ethertypes=[{}], dst_macs=[{}])",
            types.join(", "),
            macs.join(", ")
        )
    }
}

/// A Python object as an [`App`].
pub struct PyApp {
    obj: Py<PyAny>,
    name: String,
    has_tick: bool,
    filter: ControlFilter,
}

impl PyApp {
    pub(crate) fn new(obj: Bound<'_, PyAny>) -> PyResult<PyApp> {
        if !obj.hasattr("on_packet")? {
            return Err(PyValueError::new_err(
                "an SDF app needs an on_packet(self, pkt, ctl) method",
            ));
        }
        let name = obj.get_type().name()?.to_string();
        // The Rust API asks for the filter once, when the switch starts:
        // ask the Python app here, so a bad answer is the caller's error
        // rather than a worker's.
        let filter = if obj.hasattr("control_filter")? {
            let f = obj.call_method0("control_filter")?;
            if f.is_none() {
                ControlFilter::default()
            } else {
                f.downcast::<PyControlFilter>()
                    .map_err(|_| {
                        PyValueError::new_err(format!(
                            "control_filter() returned {}, expected a nexthop.sdf.ControlFilter or None",
                            f.repr().map(|r| r.to_string()).unwrap_or_default()
                        ))
                    })?
                    .get()
                    .0
                    .clone()
            }
        } else {
            ControlFilter::default()
        };
        Ok(PyApp {
            has_tick: obj.hasattr("on_tick")?,
            obj: obj.unbind(),
            name,
            filter,
        })
    }
}

/// Call `method` of the app with a short-lived Control (and packet).
fn call_app(
    py: Python<'_>,
    obj: &Py<PyAny>,
    method: &str,
    pkt: Option<&mut InPkt>,
    ctl: &mut Control<'_>,
) -> Result<(), AppError> {
    let alive = Rc::new(Cell::new(true));
    let ctl_ptr: *mut Control<'static> = (ctl as *mut Control<'_>).cast();
    let r = (|| -> PyResult<()> {
        let c = Bound::new(
            py,
            PyControl {
                ptr: ctl_ptr,
                alive: alive.clone(),
            },
        )?;
        let ret = match pkt {
            Some(p) => {
                let p = Bound::new(py, PyInPkt(InPktRef::Borrowed(p, alive.clone())))?;
                obj.bind(py).call_method1(method, (p, c))?
            }
            None => obj.bind(py).call_method1(method, (c,))?,
        };
        if !ret.is_none() {
            return Err(PyValueError::new_err(format!(
                "{method} returned {}, expected None",
                ret.repr()?
            )));
        }
        Ok(())
    })();
    alive.set(false);
    r.map_err(|e| AppError(format!("{method}: {e}")))
}

impl App for PyApp {
    fn name(&self) -> &str {
        &self.name
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        keep_thread_state();
        Python::with_gil(|py| call_app(py, &self.obj, "on_packet", Some(pkt), ctl))
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        if !self.has_tick {
            return;
        }
        keep_thread_state();
        Python::with_gil(|py| {
            if let Err(e) = call_app(py, &self.obj, "on_tick", None, ctl) {
                // on_tick has no packet to drop: report the error the way
                // Python reports exceptions nobody can catch.
                PyRuntimeError::new_err(e.0).write_unraisable(py, None);
            }
        })
    }

    fn control_filter(&self) -> ControlFilter {
        self.filter.clone()
    }
}

/// A Python thread state made for a thread Python did not start (an SDF
/// app thread), kept while the thread lives; released when it ends.
struct KeptThreadState(*mut pyo3::ffi::PyThreadState);

impl Drop for KeptThreadState {
    fn drop(&mut self) {
        // SAFETY: `self.0` is this thread's thread state, made by the
        // `PyGILState_Ensure` in `keep_thread_state` on this thread and
        // not current (the GIL let go with `PyEval_SaveThread`, and every
        // `with_gil` since let it go again). Restoring it takes the GIL;
        // the `Release` matching that `Ensure` then deletes it and lets
        // the GIL go. The runtimes stop their app threads (joined inside
        // `allow_threads`) before the interpreter can finalize.
        unsafe {
            if pyo3::ffi::Py_IsInitialized() != 0 {
                pyo3::ffi::PyEval_RestoreThread(self.0);
                pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_UNLOCKED);
            }
        }
    }
}

thread_local! {
    /// Whether `keep_thread_state` ran on this thread, and the thread
    /// state it keeps (none on Python's own threads).
    static KEPT: std::cell::RefCell<Option<Option<KeptThreadState>>> =
        const { std::cell::RefCell::new(None) };
}

/// On a thread Python did not start, give it a thread state that lives
/// as long as the thread, the GIL let go: each `Python::with_gil` after it
/// finds that state and only takes the GIL. Without it every call made a
/// thread state and tore it down, which mapped and unmapped its frame
/// stack: an `munmap` (a TLB shootdown of the other cores) per decision,
/// nine tenths of an app thread's time.
fn keep_thread_state() {
    KEPT.with(|k| {
        if k.borrow().is_some() {
            return;
        }
        // SAFETY: the interpreter is initialized (this module is loaded);
        // `PyGILState_GetThisThreadState` only reads this thread's slot.
        // With none, `PyGILState_Ensure` makes this thread's state and
        // takes the GIL, and `PyEval_SaveThread` lets the GIL go at once
        // (no Python object is touched in between); the state is released
        // by `KeptThreadState`'s drop when the thread ends.
        let kept = unsafe {
            if pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
                let _ = pyo3::ffi::PyGILState_Ensure();
                Some(KeptThreadState(pyo3::ffi::PyEval_SaveThread()))
            } else {
                None
            }
        };
        *k.borrow_mut() = Some(kept);
    });
}

/// A Python app or one of the crate's built-in Rust apps.
pub struct AnyApp(Box<dyn App>);

impl App for AnyApp {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.0.on_packet(pkt, ctl)
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        self.0.on_tick(ctl)
    }

    fn control_filter(&self) -> ControlFilter {
        self.0.control_filter()
    }
}

fn config(capacity: Option<usize>, max_masks: Option<usize>) -> Config {
    let mut cfg = Config::default();
    if let Some(c) = capacity {
        cfg.capacity = c;
    }
    if let Some(m) = max_masks {
        cfg.max_masks = m;
    }
    cfg
}

/// A whole SDF switch in-process: the decision cache in front of a Python
/// app. `caching=False` sends every packet to the app (the oracle).
#[pyclass(name = "Switch", module = "nexthop.sdf", unsendable)]
pub struct PySwitch {
    sw: Switch<AnyApp>,
    /// The Python app (None for a built-in Rust app).
    app: Option<Py<PyAny>>,
}

#[pymethods]
impl PySwitch {
    #[new]
    #[pyo3(signature = (app, ports, caching = true, capacity = None, max_masks = None))]
    fn new(
        app: Bound<'_, PyAny>,
        ports: Vec<PortId>,
        caching: bool,
        capacity: Option<usize>,
        max_masks: Option<usize>,
    ) -> PyResult<PySwitch> {
        let obj = app.clone().unbind();
        let app = AnyApp(Box::new(PyApp::new(app)?));
        let sw = Switch::new(
            app,
            config(capacity, max_masks),
            Ports::physical(&ports),
            caching,
        )
        .map_err(api_err)?;
        Ok(PySwitch { sw, app: Some(obj) })
    }

    /// The switch running the built-in Rust L2 learning switch (MAC
    /// bindings time out after `timeout` seconds): the reference the
    /// Python apps are compared with.
    #[staticmethod]
    #[pyo3(signature = (ports, caching = true, timeout = 300.0))]
    fn rust_l2(ports: Vec<PortId>, caching: bool, timeout: f64) -> PyResult<PySwitch> {
        let cfg = L2Config {
            timeout: Duration::try_from_secs_f64(timeout).map_err(api_err)?,
            ..L2Config::default()
        };
        let app = AnyApp(Box::new(L2Switch::new(cfg)));
        let sw = Switch::new(app, Config::default(), Ports::physical(&ports), caching)
            .map_err(api_err)?;
        Ok(PySwitch { sw, app: None })
    }

    /// The Python app object (None for a built-in Rust app).
    #[getter]
    fn app(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.app.as_ref().map(|a| a.clone_ref(py))
    }

    /// Forward `frame` received on `in_port`: a list of `(port, bytes)`,
    /// `port` None for the control port.
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        in_port: PortId,
        frame: &[u8],
    ) -> PyResult<Vec<(Option<PortId>, Bound<'py, PyBytes>)>> {
        let mut out = Vec::new();
        for e in self.sw.process(in_port, frame) {
            let b = PyBytes::new(py, &e.bytes);
            for &p in &e.ports {
                out.push((Some(p), b.clone()));
            }
            if e.controller {
                out.push((None, b));
            }
        }
        Ok(out)
    }

    /// Advance the switch's clock to `now` seconds and call the app's
    /// `on_tick`.
    fn tick(&mut self, now: f64) -> PyResult<()> {
        let d = Duration::try_from_secs_f64(now).map_err(api_err)?;
        self.sw.tick(d);
        Ok(())
    }

    /// Every counter: the switch's (packets, hits, misses, installed), the
    /// cache's size and the app side's.
    fn counters<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = *self.sw.counters();
        let d = stats_dict(py, &self.sw.stats())?;
        d.set_item("packets", c.packets)?;
        d.set_item("hits", c.hits)?;
        d.set_item("misses", c.misses)?;
        d.set_item("installed", c.installed)?;
        d.set_item("hit_drops", c.hit_drops.total())?;
        Ok(d)
    }

    /// Run `f(ctl)` with this switch's Control (to change state or push
    /// proactive decisions from outside a packet); returns what `f` returns.
    fn control(&mut self, py: Python<'_>, f: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let alive = Rc::new(Cell::new(true));
        let mut ctl = self.sw.control();
        let c = Bound::new(
            py,
            PyControl {
                ptr: (&mut ctl as *mut Control<'_>).cast(),
                alive: alive.clone(),
            },
        )?;
        let r = f.call1((c,));
        alive.set(false);
        Ok(r?.unbind())
    }
}

/// The drop reasons' names, as counted in `drop_reasons`.
#[pyfunction]
pub fn drop_reasons() -> Vec<&'static str> {
    DropReason::ALL.iter().map(|r| r.name()).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStateId>()?;
    m.add_class::<PyInPkt>()?;
    m.add_class::<PyOutPkt>()?;
    m.add_class::<PyControl>()?;
    m.add_class::<PySwitch>()?;
    m.add_class::<PyControlFilter>()?;
    m.add_function(wrap_pyfunction!(drop_reasons, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_pcap, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_live, m)?)?;
    m.add_function(wrap_pyfunction!(run::run_frames, m)?)?;
    Ok(())
}
