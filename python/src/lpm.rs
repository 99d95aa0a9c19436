//! `nexthop.Lpm`: a Bloomfwd IPv4 + IPv6 table ([`LpmTable`]).

use std::path::PathBuf;
use std::sync::RwLock;

use nexthop_lpm::parse::{
    load_routes, load_updates, parse_addr, parse_prefix, AnyAddr, AnyPrefix, LineError,
    NextHopMode, RouteList, UpdateKind,
};
use nexthop_lpm::persist::{FamilyStats, LpmTable, DEFAULT_V6_LEVELS};
use nexthop_lpm::{NextHop, NO_ROUTE};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{format_err, os_err, read, write, write_atomic};

/// Addresses converted and looked up per step of an IPv6 batch.
const CHUNK: usize = 4096;

/// An IPv4 and IPv6 longest-prefix-match table (Bloomfwd).
///
/// Build it with `Lpm.from_routes(pairs)`, `Lpm.from_file(path)` or open a
/// table file of `nexthop lpm build` with `Lpm.load(path)`. Lookups return
/// next hops (ints); `lookup_many` takes numpy arrays and releases the GIL.
/// Safe to share between threads: updates wait for running lookups.
#[pyclass(frozen, module = "nexthop")]
pub struct Lpm {
    t: RwLock<LpmTable>,
}

fn value_err(e: LineError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn prefix_of(s: &str) -> PyResult<AnyPrefix> {
    parse_prefix(s).map_err(value_err)
}

fn next_hop_of(nh: i128) -> PyResult<NextHop> {
    match u32::try_from(nh) {
        Ok(v) if v != NO_ROUTE => Ok(v),
        _ => Err(value_err(LineError::BadNextHop(nh.to_string()))),
    }
}

/// Iterate a dict's items or any iterable of pairs.
fn pairs_of<'py>(pairs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
    if let Ok(d) = pairs.downcast::<PyDict>() {
        d.items().as_any().try_iter()
    } else {
        pairs.try_iter()
    }
}

fn family_dict<'py>(py: Python<'py>, s: &FamilyStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("prefixes", s.prefixes)?;
    d.set_item("lookup_bytes", s.lookup_bytes)?;
    d.set_item(
        "bytes_per_prefix",
        if s.prefixes == 0 {
            0.0
        } else {
            s.lookup_bytes as f64 / s.prefixes as f64
        },
    )?;
    d.set_item("direct_prefixes", s.direct_prefixes)?;
    d.set_item("direct_bytes", s.direct_bytes)?;
    d.set_item("direct_bits", s.config.direct_bits)?;
    d.set_item("refined_slots", s.refined.0)?;
    d.set_item("refined_sub_slots", s.refined.1)?;
    d.set_item("sub_mask_bytes", s.sub_mask_bytes)?;
    d.set_item("fpr_target", s.config.fpr)?;
    d.set_item("filter_hash", s.config.filter_hash.name())?;
    d.set_item("table_hash", s.config.table_hash.name())?;
    let groups = PyList::empty(py);
    for (g, f) in s.groups.iter().zip(&s.measured_fpr) {
        let gd = PyDict::new(py);
        gd.set_item("level", g.level)?;
        gd.set_item("lengths", (g.lo, g.level))?;
        gd.set_item("prefixes", g.prefixes)?;
        gd.set_item("expanded", g.expanded)?;
        gd.set_item("filter_bits", g.filter_bits)?;
        gd.set_item("hashes", g.hashes)?;
        gd.set_item("filter_bytes", g.filter_bytes)?;
        gd.set_item("table_bytes", g.table_bytes)?;
        gd.set_item("measured_fpr", *f)?;
        groups.append(gd)?;
    }
    d.set_item("groups", groups)?;
    Ok(d)
}

impl Lpm {
    fn build(routes: &RouteList, v6_levels: usize) -> PyResult<Lpm> {
        if v6_levels == 0 {
            return Err(PyValueError::new_err("v6_levels must be at least 1"));
        }
        let t = LpmTable::build(routes, v6_levels)
            .map_err(|e| PyValueError::new_err(format!("invalid configuration: {e}")))?;
        Ok(Lpm { t: RwLock::new(t) })
    }
}

#[pymethods]
impl Lpm {
    /// Build from pairs `(prefix_text, next_hop)` (IPv4 and IPv6 mixed), an
    /// iterable or a dict. A later pair for the same prefix replaces an
    /// earlier one. `v6_levels` is the number of IPv6 expansion levels.
    ///
    /// Raises ValueError naming the pair (0-based) for a malformed prefix or
    /// a next hop outside 0..4294967294, TypeError for a non-pair.
    #[staticmethod]
    #[pyo3(signature = (pairs, v6_levels = DEFAULT_V6_LEVELS))]
    fn from_routes(pairs: &Bound<'_, PyAny>, v6_levels: usize) -> PyResult<Lpm> {
        let mut routes = RouteList::default();
        for (i, item) in pairs_of(pairs)?.enumerate() {
            let (p, nh): (String, i128) = item?.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "pair {i}: expected a (prefix: str, next_hop: int) pair"
                ))
            })?;
            let p =
                parse_prefix(&p).map_err(|e| PyValueError::new_err(format!("pair {i}: {e}")))?;
            let nh = match u32::try_from(nh) {
                Ok(v) if v != NO_ROUTE => v,
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "pair {i}: {}",
                        LineError::BadNextHop(nh.to_string())
                    )))
                }
            };
            match p {
                AnyPrefix::V4(p) => routes.v4.push((p, nh)),
                AnyPrefix::V6(p) => routes.v6.push((p, nh)),
            }
        }
        Lpm::build(&routes, v6_levels)
    }

    /// Build from a route file as `nexthop lpm build --routes` reads it:
    /// `prefix/len next-hop` per line, `#` comments, plain or gzip. With
    /// `asn=True` the second field is an origin AS number and the next hop
    /// is `asn % 250 + 1` (the `prefix/len<TAB>asn` files of pyasn).
    ///
    /// Raises OSError when the file cannot be read, ValueError
    /// `PATH:LINE: reason` for a malformed line.
    #[staticmethod]
    #[pyo3(signature = (path, asn = false, v6_levels = DEFAULT_V6_LEVELS))]
    fn from_file(py: Python<'_>, path: PathBuf, asn: bool, v6_levels: usize) -> PyResult<Lpm> {
        let mode = if asn {
            NextHopMode::Asn
        } else {
            NextHopMode::Raw
        };
        let routes = py.allow_threads(|| load_routes(&path, mode));
        let routes = routes.map_err(|e| match e {
            nexthop_lpm::parse::LoadError::Io { .. } => {
                pyo3::exceptions::PyOSError::new_err(e.to_string())
            }
            other => PyValueError::new_err(other.to_string()),
        })?;
        Lpm::build(&routes, v6_levels)
    }

    /// Open a table file written by `nexthop lpm build` or `Lpm.save`.
    ///
    /// Raises OSError when it cannot be read, nexthop.FormatError when it is
    /// not a table file or is corrupted.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Lpm> {
        let bytes = std::fs::read(&path).map_err(|e| os_err(&path, e))?;
        let t = py
            .allow_threads(|| LpmTable::decode(&bytes))
            .map_err(|e| format_err(&path, e))?;
        Ok(Lpm { t: RwLock::new(t) })
    }

    /// Write the table file (`nexthop lpm lookup --table` reads it),
    /// replacing `path` atomically.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let bytes = py.allow_threads(|| read(&self.t).encode());
        write_atomic(&path, &bytes)
    }

    /// The next hop of the longest prefix that matches `addr` (IPv4 or IPv6
    /// text), or None. Raises ValueError for a malformed address.
    fn lookup(&self, addr: &str) -> PyResult<Option<NextHop>> {
        let a = parse_addr(addr).map_err(value_err)?;
        Ok(read(&self.t).lookup(a))
    }

    /// Batched lookups with the GIL released: a numpy uint32 array of IPv4
    /// addresses (host order, as `int(ipaddress.IPv4Address(...))`) or an
    /// (n, 16) uint8 array of IPv6 addresses (network byte order). Returns a
    /// uint32 array of next hops, `nexthop.NO_ROUTE` where nothing matches.
    /// Contiguous input is read in place, without a copy.
    ///
    /// Raises TypeError for another dtype, ValueError for another shape.
    fn lookup_many<'py>(
        &self,
        py: Python<'py>,
        addrs: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        if let Ok(a) = addrs.downcast::<PyArray1<u32>>() {
            let a = a.readonly();
            let out = PyArray1::<u32>::zeros(py, a.len(), false);
            {
                // SAFETY: `out` was created above and is referenced nowhere
                // else, so this is the only view of its memory.
                let o = unsafe { out.as_slice_mut() }.expect("a new array is contiguous");
                let copy;
                let input = match a.as_slice() {
                    Ok(s) => s,
                    Err(_) => {
                        copy = a.as_array().iter().copied().collect::<Vec<u32>>();
                        &copy[..]
                    }
                };
                py.allow_threads(|| read(&self.t).v4.table().lookup_batch(input, o));
            }
            return Ok(out);
        }
        if let Ok(a) = addrs.downcast::<PyArray2<u8>>() {
            let a = a.readonly();
            let shape = a.shape();
            if shape[1] != 16 {
                return Err(PyValueError::new_err(format!(
                    "IPv6 addresses are an (n, 16) uint8 array, got shape ({}, {})",
                    shape[0], shape[1]
                )));
            }
            let n = shape[0];
            let out = PyArray1::<u32>::zeros(py, n, false);
            {
                // SAFETY: as above, `out` is new and referenced nowhere else.
                let o = unsafe { out.as_slice_mut() }.expect("a new array is contiguous");
                let copy;
                let input = match a.as_slice() {
                    Ok(s) => s,
                    Err(_) => {
                        copy = a.as_array().iter().copied().collect::<Vec<u8>>();
                        &copy[..]
                    }
                };
                py.allow_threads(|| {
                    let t = read(&self.t);
                    let mut keys = Vec::with_capacity(CHUNK.min(n));
                    for (rows, o) in input.chunks(16 * CHUNK).zip(o.chunks_mut(CHUNK)) {
                        keys.clear();
                        keys.extend(
                            rows.chunks_exact(16)
                                .map(|r| u128::from_be_bytes(r.try_into().expect("16-byte rows"))),
                        );
                        t.v6.table().lookup_batch(&keys, o);
                    }
                });
            }
            return Ok(out);
        }
        let desc = match addrs.downcast::<numpy::PyUntypedArray>() {
            Ok(u) => format!("a {}-dimensional {} array", u.ndim(), u.dtype()),
            Err(_) => format!("a {}", addrs.get_type().name()?),
        };
        Err(PyTypeError::new_err(format!(
            "lookup_many takes a numpy uint32 array (IPv4) or an (n, 16) uint8 array (IPv6), got {desc}"
        )))
    }

    /// Benchmark hook (not a lookup API): the Rust batch rate of this
    /// table on the IPv4 addresses of `addrs` (a numpy uint32 array, copied
    /// once), in lookups per second: `lookup_batch` on consecutive batches
    /// of `batch` addresses, the call `lookup_many` makes, timed in Rust
    /// with the GIL released; the best of `rounds` passes. Examples compare
    /// `lookup_many`'s rate from Python with it in the same process.
    #[pyo3(signature = (addrs, rounds = 3, batch = 4096))]
    fn _native_batch_rate(
        &self,
        py: Python<'_>,
        addrs: numpy::PyReadonlyArray1<'_, u32>,
        rounds: usize,
        batch: usize,
    ) -> PyResult<f64> {
        if rounds == 0 || batch == 0 || addrs.len() == 0 {
            return Err(PyValueError::new_err(
                "rounds, batch and the number of addresses must be positive",
            ));
        }
        let input = addrs.as_array().iter().copied().collect::<Vec<u32>>();
        Ok(py.allow_threads(|| {
            let t = read(&self.t);
            let table = t.v4.table();
            let mut out = vec![0u32; batch];
            best_rate(rounds, input.len(), || {
                for keys in input.chunks(batch) {
                    table.lookup_batch(keys, &mut out[..keys.len()]);
                    std::hint::black_box(&out);
                }
            })
        }))
    }

    /// Add or replace the route of `prefix` (text). Returns True when the
    /// table changed. Raises ValueError for a malformed prefix or next hop.
    fn announce(&self, py: Python<'_>, prefix: &str, next_hop: i128) -> PyResult<bool> {
        let p = prefix_of(prefix)?;
        let nh = next_hop_of(next_hop)?;
        Ok(py.allow_threads(|| {
            let mut t = write(&self.t);
            match p {
                AnyPrefix::V4(p) => t.v4.announce(p, nh),
                AnyPrefix::V6(p) => t.v6.announce(p, nh),
            }
        }))
    }

    /// Remove the route of `prefix`. Returns False when it was absent.
    fn withdraw(&self, py: Python<'_>, prefix: &str) -> PyResult<bool> {
        let p = prefix_of(prefix)?;
        Ok(py.allow_threads(|| {
            let mut t = write(&self.t);
            match p {
                AnyPrefix::V4(p) => t.v4.withdraw(p),
                AnyPrefix::V6(p) => t.v6.withdraw(p),
            }
        }))
    }

    /// Apply an update stream as `nexthop lpm update --updates` reads it
    /// (`time a|w prefix [next-hop]` per line, plain or gzip). The whole file
    /// is parsed first: on a malformed line nothing changes. Returns
    /// `{"announces", "withdraws", "absent"}` counts.
    fn apply_updates<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let updates = py.allow_threads(|| load_updates(&path));
        let updates = updates.map_err(|e| match e {
            nexthop_lpm::parse::LoadError::Io { .. } => {
                pyo3::exceptions::PyOSError::new_err(e.to_string())
            }
            other => PyValueError::new_err(other.to_string()),
        })?;
        let (ann, wd, absent) = py.allow_threads(|| {
            let mut t = write(&self.t);
            let (mut ann, mut wd, mut absent) = (0usize, 0usize, 0usize);
            for u in &updates {
                let changed = t.apply(u);
                match u.kind {
                    UpdateKind::Announce(_) => ann += 1,
                    UpdateKind::Withdraw if changed => wd += 1,
                    UpdateKind::Withdraw => absent += 1,
                }
            }
            (ann, wd, absent)
        });
        let d = PyDict::new(py);
        d.set_item("announces", ann)?;
        d.set_item("withdraws", wd)?;
        d.set_item("absent", absent)?;
        Ok(d)
    }

    /// Statistics as `nexthop lpm stats --json` prints them:
    /// `{"ipv4": {...}, "ipv6": {...}}`; false-positive rates are measured
    /// with `samples` random absent keys per filter.
    #[pyo3(signature = (samples = 100_000))]
    fn stats<'py>(&self, py: Python<'py>, samples: usize) -> PyResult<Bound<'py, PyDict>> {
        let (v4, v6) = py.allow_threads(|| read(&self.t).stats(samples));
        let d = PyDict::new(py);
        d.set_item("ipv4", family_dict(py, &v4)?)?;
        d.set_item("ipv6", family_dict(py, &v6)?)?;
        Ok(d)
    }

    /// The routes, as `[(prefix_text, next_hop)]`, IPv4 first.
    fn routes(&self) -> Vec<(String, NextHop)> {
        let t = read(&self.t);
        let mut out: Vec<(String, NextHop)> =
            t.v4.rib()
                .iter()
                .map(|(p, nh)| (p.to_string(), nh))
                .collect();
        out.extend(t.v6.rib().iter().map(|(p, nh)| (p.to_string(), nh)));
        out
    }

    /// Number of prefixes (IPv4 + IPv6).
    fn __len__(&self) -> usize {
        let t = read(&self.t);
        t.v4.rib().len() + t.v6.rib().len()
    }

    fn __repr__(&self) -> String {
        let t = read(&self.t);
        format!(
            "<nexthop.Lpm: {} IPv4 and {} IPv6 prefixes>",
            t.v4.rib().len(),
            t.v6.rib().len()
        )
    }

    /// Whether `addr` is a well-formed IPv4 or IPv6 address with a route.
    fn __contains__(&self, addr: &str) -> bool {
        parse_addr(addr).is_ok_and(|a: AnyAddr| read(&self.t).lookup(a).is_some())
    }
}

/// Lookups per second of the best of `rounds` runs of `pass`, each doing
/// `n` lookups (the benchmark hooks' timer).
pub(crate) fn best_rate(rounds: usize, n: usize, mut pass: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = std::time::Instant::now();
        pass();
        best = best.min(t.elapsed().as_secs_f64());
    }
    n as f64 / best.max(1e-12)
}
