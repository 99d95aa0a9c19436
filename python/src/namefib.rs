//! `nexthop.NameFib`: the NDN name FIB (binary search of hash tables,
//! [`FibControl`]).

use std::collections::HashMap;
use std::sync::RwLock;

use nexthop_ndn::{Config, FibControl, NameBuf, NameView, NextHop, Trace};
use nexthop_wire::ndn::Name;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{read, write, UpdateError};

/// An NDN name FIB: longest-name-prefix match of NDN names (URI text) to
/// lists of next-hop faces.
///
/// Build it with `NameFib.build(pairs)`; `lookup(uri)` returns the matched
/// prefix in canonical URI form and its faces. Safe to share between
/// threads; `lookup_many` releases the GIL.
#[pyclass(frozen, module = "nexthop")]
pub struct NameFib {
    c: RwLock<FibControl>,
}

fn name_of(uri: &str) -> PyResult<Name> {
    Name::from_uri(uri).map_err(|e| PyValueError::new_err(format!("invalid name '{uri}': {e}")))
}

fn hops_of(faces: &[u32]) -> Vec<NextHop> {
    faces
        .iter()
        .map(|&face| NextHop { face, cost: 0 })
        .collect()
}

/// A match: the prefix in canonical URI form and its faces.
type Found = Option<(String, Vec<u32>)>;

fn one(c: &FibControl, name: &Name) -> Found {
    let fib = c.fib();
    let m = fib.lookup_name(name, &mut Trace::default())?;
    Some((
        name.prefix(m.len).to_string(),
        fib.next_hops(m.nh).iter().map(|h| h.face).collect(),
    ))
}

#[pymethods]
impl NameFib {
    /// Build from pairs `(uri, [face, ...])` (an iterable or a dict).
    /// `max_components` is the longest name a rule may have (default: the
    /// longest rule given; later inserts cannot exceed it).
    ///
    /// Raises ValueError naming the pair for a malformed name, an empty or
    /// repeated face list, or a name given twice.
    #[staticmethod]
    #[pyo3(signature = (pairs, max_components = None))]
    fn build(
        py: Python<'_>,
        pairs: &Bound<'_, PyAny>,
        max_components: Option<usize>,
    ) -> PyResult<NameFib> {
        let it = if let Ok(d) = pairs.downcast::<PyDict>() {
            d.items().as_any().try_iter()?
        } else {
            pairs.try_iter()?
        };
        let mut rules = Vec::new();
        let mut first: HashMap<Vec<u8>, usize> = HashMap::new();
        for (i, item) in it.enumerate() {
            let (uri, faces): (String, Vec<u32>) = item?.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "pair {i}: expected a (name: str, faces: list[int]) pair"
                ))
            })?;
            let name = Name::from_uri(&uri).map_err(|e| {
                PyValueError::new_err(format!("pair {i}: invalid name '{uri}': {e}"))
            })?;
            let buf = NameBuf::from_name(&name).map_err(|e| {
                PyValueError::new_err(format!("pair {i}: invalid name '{uri}': {e}"))
            })?;
            if let Some(prev) = first.insert(buf.tlv().to_vec(), i) {
                return Err(PyValueError::new_err(format!(
                    "pair {i}: duplicate name '{uri}' (first in pair {prev})"
                )));
            }
            rules.push((i, buf, hops_of(&faces)));
        }
        let longest = rules
            .iter()
            .map(|(_, n, _)| n.component_count())
            .max()
            .unwrap_or(1)
            .max(1);
        let k = max_components.unwrap_or(longest);
        if k < longest {
            return Err(PyValueError::new_err(format!(
                "max_components {k} is below the longest rule ({longest} components)"
            )));
        }
        let cfg = Config {
            max_components: k,
            ..Config::default()
        };
        let c = py.allow_threads(|| -> PyResult<FibControl> {
            let mut c = FibControl::new(cfg).map_err(|e| PyValueError::new_err(e.to_string()))?;
            for (i, n, h) in &rules {
                c.insert(n, h)
                    .map_err(|e| PyValueError::new_err(format!("pair {i}: {e}")))?;
            }
            Ok(c)
        })?;
        Ok(NameFib { c: RwLock::new(c) })
    }

    /// The longest rule that is a prefix of `uri`: `(prefix_uri, faces)`, or
    /// None. Raises ValueError for a malformed name.
    fn lookup(&self, uri: &str) -> PyResult<Found> {
        let name = name_of(uri)?;
        Ok(one(&read(&self.c), &name))
    }

    /// `lookup` of each name with the GIL released. Raises ValueError naming
    /// the first malformed name (`names[i]`); nothing is looked up then.
    fn lookup_many(&self, py: Python<'_>, uris: Vec<String>) -> PyResult<Vec<Found>> {
        py.allow_threads(|| {
            let names = uris
                .iter()
                .enumerate()
                .map(|(i, u)| {
                    Name::from_uri(u).map_err(|e| {
                        PyValueError::new_err(format!("names[{i}]: invalid name '{u}': {e}"))
                    })
                })
                .collect::<PyResult<Vec<Name>>>()?;
            let c = read(&self.c);
            Ok(names.iter().map(|n| one(&c, n)).collect())
        })
    }

    /// Add rule `uri` with `faces`, or replace its faces. Raises
    /// nexthop.UpdateError when refused (too many components, empty or
    /// repeated faces); the table is unchanged then.
    fn insert(&self, py: Python<'_>, uri: &str, faces: Vec<u32>) -> PyResult<()> {
        let name = name_of(uri)?;
        let buf = NameBuf::from_name(&name)
            .map_err(|e| PyValueError::new_err(format!("invalid name '{uri}': {e}")))?;
        let hops = hops_of(&faces);
        py.allow_threads(|| write(&self.c).insert(&buf, &hops))
            .map_err(|e| UpdateError::new_err(format!("{uri}: {e}")))
    }

    /// Delete rule `uri`. Raises nexthop.UpdateError when it is absent.
    fn remove(&self, py: Python<'_>, uri: &str) -> PyResult<()> {
        let name = name_of(uri)?;
        let buf = NameBuf::from_name(&name)
            .map_err(|e| PyValueError::new_err(format!("invalid name '{uri}': {e}")))?;
        py.allow_threads(|| write(&self.c).remove(&buf))
            .map_err(|e| UpdateError::new_err(format!("{uri}: {e}")))
    }

    /// Statistics: rules, hash keys, markers, bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = read(&self.c).stats();
        let d = PyDict::new(py);
        d.set_item("rules", s.rules)?;
        d.set_item("keys", s.keys)?;
        d.set_item("markers", s.markers)?;
        d.set_item("entries", s.entries)?;
        d.set_item("overflow_buckets", s.overflow_buckets)?;
        d.set_item("bytes", s.bytes)?;
        Ok(d)
    }

    /// Number of rules.
    fn __len__(&self) -> usize {
        read(&self.c).len()
    }

    fn __repr__(&self) -> String {
        format!("<nexthop.NameFib: {} rules>", read(&self.c).len())
    }
}
