//! `nexthop.Controller`: an admin client of a running `nexthop controller`
//! (`nexthop_control::AdminClient`): push route changes, read counters.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use nexthop_control::{AdminClient, AdminError, AuthKey, KeyError, PushReport};
use pyo3::exceptions::{PyConnectionError, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::errors::{ControlError, UpdateError};

/// A connection to a running `nexthop controller`'s admin channel (the
/// same listener and key file as its forwarders). Changes are applied by
/// the controller exactly as a changes file is (`nexthop controller
/// --changes`): all or nothing, one delta pushed to every forwarder.
///
/// ``Controller(addr, key_file, timeout=30.0)`` connects at once.
/// ``add``, ``delete``, ``change`` and ``push`` return what was applied
/// (a dict: ``changes``, ``version``, ``generation``, ``names``,
/// ``deltas``, ``followers``, ...); ``stats()`` the controller's counters.
/// Raises ``nexthop.UpdateError`` with the controller's message (``line N:
/// reason``) when it refuses a change (nothing applied, the connection
/// stays usable), ``nexthop.ControlError`` when the handshake fails (a
/// wrong key file) or the controller breaks the protocol,
/// ``ConnectionError`` when nothing answers, ``OSError`` for an unreadable
/// key file or a broken connection (the next call reconnects). Calls
/// release the GIL; one request at a time per object.
#[pyclass(frozen, module = "nexthop", name = "Controller")]
pub struct PyController {
    addr: String,
    key: AuthKey,
    timeout: Duration,
    client: Mutex<Option<AdminClient>>,
}

fn key_err(path: &std::path::Path, e: KeyError) -> PyErr {
    match e {
        KeyError::TooShort { .. } => PyValueError::new_err(format!("{}: {e}", path.display())),
        // The other errors name the file themselves.
        e => PyOSError::new_err(e.to_string()),
    }
}

fn admin_err(e: AdminError) -> PyErr {
    match e {
        AdminError::Refused(text) => UpdateError::new_err(text),
        AdminError::Connect { .. } => PyConnectionError::new_err(e.to_string()),
        AdminError::Io(_) => PyOSError::new_err(e.to_string()),
        e => ControlError::new_err(e.to_string()),
    }
}

fn report_dict<'py>(py: Python<'py>, r: &PushReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("changes", r.changes)?;
    d.set_item("deltas", r.deltas)?;
    d.set_item("slot_writes", r.slot_writes)?;
    d.set_item("rebuilds", r.rebuilds)?;
    d.set_item("new_actions", r.new_actions)?;
    d.set_item("version", r.version)?;
    d.set_item("generation", r.generation)?;
    d.set_item("followers", r.followers)?;
    d.set_item("names", r.names)?;
    Ok(d)
}

/// A name or action as one field of a changes-file line.
fn field(what: &str, i: usize, s: &str) -> PyResult<()> {
    if s.is_empty() || s.chars().any(char::is_whitespace) || s.starts_with('#') {
        return Err(PyValueError::new_err(format!(
            "change {i}: {what} {s:?} must be one non-empty field without whitespace"
        )));
    }
    Ok(())
}

/// One change as a changes-file line.
fn change_line(i: usize, op: &str, name: &str, action: Option<&str>) -> PyResult<String> {
    let op = match op {
        "+" | "add" => "+",
        "-" | "delete" => "-",
        "=" | "change" => "=",
        other => {
            return Err(PyValueError::new_err(format!(
                "change {i}: unknown operation {other:?} (add/+, delete/-, change/=)"
            )))
        }
    };
    field("name", i, name)?;
    match (op, action) {
        ("-", None) => Ok(format!("- {name}\n")),
        ("-", Some(_)) => Err(PyValueError::new_err(format!(
            "change {i}: delete takes only a name"
        ))),
        (_, Some(a)) => {
            field("action", i, a)?;
            Ok(format!("{op} {name} {a}\n"))
        }
        (_, None) => Err(PyValueError::new_err(format!(
            "change {i}: {op} takes a name and an action"
        ))),
    }
}

impl PyController {
    /// Run `f` on the connection, connecting first when there is none;
    /// an error other than a refusal drops the connection.
    fn with_client<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut AdminClient) -> Result<T, AdminError> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        py.allow_threads(|| {
            let mut g = self.client.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                *g = Some(AdminClient::connect(
                    self.addr.as_str(),
                    &self.key,
                    self.timeout,
                )?);
            }
            let c = g
                .as_mut()
                .ok_or_else(|| AdminError::Protocol("no connection to the controller".into()))?;
            let r = f(c);
            if matches!(r, Err(ref e) if !matches!(e, AdminError::Refused(_))) {
                *g = None;
            }
            r
        })
        .map_err(admin_err)
    }

    fn push_text<'py>(&self, py: Python<'py>, text: String) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with_client(py, move |c| c.push(&text))?;
        report_dict(py, &r)
    }
}

#[pymethods]
impl PyController {
    #[new]
    #[pyo3(signature = (addr, key_file, timeout = 30.0))]
    fn new(py: Python<'_>, addr: String, key_file: PathBuf, timeout: f64) -> PyResult<Self> {
        if !(timeout.is_finite() && timeout > 0.0 && timeout < 1e9) {
            return Err(PyValueError::new_err(format!(
                "timeout must be a positive number of seconds, got {timeout}"
            )));
        }
        let key = AuthKey::from_file(&key_file).map_err(|e| key_err(&key_file, e))?;
        let c = PyController {
            addr,
            key,
            timeout: Duration::from_secs_f64(timeout),
            client: Mutex::new(None),
        };
        c.with_client(py, |_| Ok(()))?;
        Ok(c)
    }

    /// Add ``name`` with ``action`` (a port ``"3"``, a port set ``"1+3"``,
    /// ``"drop"`` or ``"controller"``); UpdateError when present.
    fn add<'py>(&self, py: Python<'py>, name: &str, action: &str) -> PyResult<Bound<'py, PyDict>> {
        self.push_text(py, change_line(0, "+", name, Some(action))?)
    }

    /// Delete ``name``; UpdateError when absent.
    fn delete<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        self.push_text(py, change_line(0, "-", name, None)?)
    }

    /// Change the action of ``name``; UpdateError when absent.
    fn change<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        action: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.push_text(py, change_line(0, "=", name, Some(action))?)
    }

    /// Apply a batch of changes, all or nothing: the text of a changes
    /// file (``+ NAME ACTION``, ``- NAME``, ``= NAME ACTION`` lines), or
    /// an iterable of tuples ``(op, name, action)`` / ``("-", name)`` with
    /// ``op`` one of ``+``/``add``, ``-``/``delete``, ``=``/``change``.
    /// UpdateError names the refused line (1-based, tuple i is line i+1).
    fn push<'py>(
        &self,
        py: Python<'py>,
        changes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let text = if changes.is_instance_of::<PyString>() {
            changes.extract::<String>()?
        } else {
            let mut text = String::new();
            let it = changes.try_iter().map_err(|_| {
                PyTypeError::new_err("changes must be a str or an iterable of tuples")
            })?;
            for (i, item) in it.enumerate() {
                let item = item?;
                let t = item.downcast::<PyTuple>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "change {i}: expected a tuple (op, name[, action])"
                    ))
                })?;
                let s = |j: usize| -> PyResult<String> {
                    t.get_item(j)?.extract::<String>().map_err(|_| {
                        PyTypeError::new_err(format!("change {i}: field {j} must be a str"))
                    })
                };
                let line = match t.len() {
                    2 => change_line(i, &s(0)?, &s(1)?, None)?,
                    3 => change_line(i, &s(0)?, &s(1)?, Some(&s(2)?))?,
                    n => {
                        return Err(PyTypeError::new_err(format!(
                            "change {i}: a tuple of 2 or 3 fields, got {n}"
                        )))
                    }
                };
                text.push_str(&line);
            }
            text
        };
        self.push_text(py, text)
    }

    /// The controller's counters (connections, snapshots and deltas sent,
    /// acks, pushes, propagation times in ns) and its FIB's ``version``,
    /// ``generation`` and ``names``, as a dict of ints.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let v = self.with_client(py, |c| c.stats())?;
        let d = PyDict::new(py);
        for (k, x) in v {
            d.set_item(k, x)?;
        }
        Ok(d)
    }

    /// Close the connection (a later call reconnects).
    fn close(&self, py: Python<'_>) {
        py.allow_threads(|| {
            *self.client.lock().unwrap_or_else(|e| e.into_inner()) = None;
        });
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        self.close(py);
        false
    }

    /// The controller's address.
    #[getter]
    fn addr(&self) -> &str {
        &self.addr
    }

    fn __repr__(&self) -> String {
        format!("nexthop.Controller({:?})", self.addr)
    }
}
