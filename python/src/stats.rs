//! `nexthop.forwarder_stats`: a running forwarder's counters, as `nexthop
//! stats --json` prints them.

use std::time::Duration;

use nexthop_dataplane::metrics::{fetch_snapshot, FetchError};
use pyo3::exceptions::{PyConnectionError, PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::errors::FormatError;

/// Fetch a running forwarder's counters from its metrics endpoint
/// (`nexthop run --metrics HOST:PORT`, `GET /stats.json`) and return them
/// as a dict, the object `nexthop stats --json` prints. The GIL is
/// released while waiting. Raises ConnectionError when nothing answers,
/// OSError for other network errors, nexthop.FormatError for a response
/// that is not a forwarder's, ValueError for a bad timeout.
#[pyfunction]
#[pyo3(signature = (addr = "127.0.0.1:9464", timeout = 5.0))]
pub fn forwarder_stats(py: Python<'_>, addr: &str, timeout: f64) -> PyResult<PyObject> {
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(PyValueError::new_err(format!(
            "timeout must be a positive number of seconds, got {timeout}"
        )));
    }
    let t = Duration::from_secs_f64(timeout);
    let snap = py
        .allow_threads(|| fetch_snapshot(addr, t))
        .map_err(|e| match e {
            FetchError::Connect { .. } => PyConnectionError::new_err(e.to_string()),
            FetchError::BadResponse { .. } | FetchError::Json { .. } => {
                FormatError::new_err(e.to_string())
            }
            other => PyOSError::new_err(other.to_string()),
        })?;
    py.import("json")?
        .call_method1("loads", (snap.to_json(),))?
        .extract()
}
