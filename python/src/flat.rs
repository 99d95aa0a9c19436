//! `nexthop.FlatFib`: a Concise (Othello) FIB of flat names, its control
//! side ([`ConciseFib`]) and the data-plane structure ([`Query`]) that the
//! lookups read, kept in step by the Othello's deltas.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use nexthop_othello::fib::{Action, ConciseFib, FibError, KeyType, NameKey};
use nexthop_othello::fibdir::{self, Current, ACTIONS, CONTROL};
use nexthop_othello::{Config, Delta, Query, Sizing, MISS};
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{format_err, os_err, read, write, FormatError, UpdateError};

/// What a lookup of a name the table does not hold answers (as the CLI).
const MISS_TEXT: &str = "miss";

/// The typed operations, one implementation per key type.
trait Flat: Send + Sync {
    fn key_type(&self) -> KeyType;
    fn len(&self) -> usize;
    fn lookup_many(&self, names: &[String]) -> Result<Vec<u64>, String>;
    fn lookup_u64(&self, keys: &[u64], out: &mut [u64]) -> bool;
    fn action(&self, id: u64) -> Option<String>;
    fn get(&self, name: &str) -> Result<Option<String>, String>;
    fn insert(&mut self, name: &str, action: &Action) -> PyResult<()>;
    fn delete(&mut self, name: &str) -> PyResult<()>;
    fn change(&mut self, name: &str, action: &Action) -> PyResult<()>;
    fn save(&self, dir: &Path) -> PyResult<u64>;
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyDict>>;
    fn items(&self) -> Vec<(String, String)>;
    fn actions(&self) -> Vec<String>;
}

struct Typed<K: NameKey> {
    key_type: KeyType,
    fib: ConciseFib<K>,
    query: Query,
}

fn name_err(name: &str, why: &str) -> String {
    format!("invalid name '{name}': {why}")
}

fn parse<K: NameKey>(name: &str) -> Result<K, String> {
    K::parse_name(name).map_err(|why| name_err(name, &why))
}

fn update_err(e: FibError) -> PyErr {
    UpdateError::new_err(e.to_string())
}

impl<K: NameKey + Send + Sync> Typed<K> {
    /// Bring the data-plane structure up to date after `change`.
    fn follow(&mut self, change: &nexthop_othello::Change) {
        match self.fib.othello().delta(change, 0) {
            Delta::Snapshot(_) => self.query = self.fib.othello().export(0),
            d @ Delta::Ops { .. } => {
                if self.query.apply(&d).is_err() {
                    self.query = self.fib.othello().export(0);
                }
            }
        }
    }
}

impl<K: NameKey + Send + Sync> Flat for Typed<K> {
    fn key_type(&self) -> KeyType {
        self.key_type
    }
    fn len(&self) -> usize {
        self.fib.len()
    }
    fn lookup_many(&self, names: &[String]) -> Result<Vec<u64>, String> {
        let keys = names
            .iter()
            .enumerate()
            .map(|(i, n)| parse::<K>(n).map_err(|e| format!("names[{i}]: {e}")))
            .collect::<Result<Vec<K>, String>>()?;
        let mut out = vec![0u64; keys.len()];
        self.query.lookup_batch(&keys, &mut out);
        Ok(out)
    }
    fn lookup_u64(&self, keys: &[u64], out: &mut [u64]) -> bool {
        if self.key_type != KeyType::U64 {
            return false;
        }
        // The same call `lookup_many` makes with K = u64.
        self.query.lookup_batch(keys, out);
        true
    }
    fn action(&self, id: u64) -> Option<String> {
        if id == MISS {
            return None;
        }
        self.fib.action_table().get(id).map(|a| a.to_string())
    }
    fn get(&self, name: &str) -> Result<Option<String>, String> {
        let k = parse::<K>(name)?;
        Ok(self.fib.get(&k).map(|a| a.to_string()))
    }
    fn insert(&mut self, name: &str, action: &Action) -> PyResult<()> {
        let k = parse::<K>(name).map_err(PyValueError::new_err)?;
        let c = self.fib.insert(k, action).map_err(update_err)?;
        self.follow(&c);
        Ok(())
    }
    fn delete(&mut self, name: &str) -> PyResult<()> {
        let k = parse::<K>(name).map_err(PyValueError::new_err)?;
        let c = self.fib.remove(&k).map_err(update_err)?;
        self.follow(&c);
        Ok(())
    }
    fn change(&mut self, name: &str, action: &Action) -> PyResult<()> {
        let k = parse::<K>(name).map_err(PyValueError::new_err)?;
        let c = self.fib.change(&k, action).map_err(update_err)?;
        self.follow(&c);
        Ok(())
    }
    fn save(&self, dir: &Path) -> PyResult<u64> {
        fibdir::check_build_target(dir, &[]).map_err(|e| os_err(dir, e))?;
        let done = fibdir::commit_fib(dir, self.key_type, &self.fib)
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
        Ok(done.generation)
    }
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let s = self.fib.othello().stats();
        let cfg = self.fib.othello().config();
        let d = PyDict::new(py);
        d.set_item("key_type", self.key_type.name())?;
        d.set_item("names", s.len)?;
        d.set_item("capacity", s.capacity)?;
        d.set_item("value_bits", s.meta.value_bits)?;
        d.set_item("check_bits", s.meta.check_bits)?;
        d.set_item("ma", s.meta.ma)?;
        d.set_item("mb", s.meta.mb)?;
        d.set_item("slot_bytes", s.slot_bytes)?;
        d.set_item("data_plane_bytes", s.query_bytes)?;
        d.set_item("bits_per_key", s.bits_per_key)?;
        d.set_item("seed", s.meta.seed)?;
        d.set_item("config_seed", cfg.seed)?;
        d.set_item("othello_generation", s.meta.generation)?;
        d.set_item("sizing", s.meta.sizing.to_string())?;
        d.set_item("stash_entries", s.stash_len)?;
        d.set_item("stash_capacity", cfg.stash_capacity)?;
        d.set_item("actions", self.fib.action_table().len())?;
        d.set_item("action_table", PyList::new(py, self.actions())?)?;
        d.set_item("grow_rebuilds", s.counters.grow_rebuilds)?;
        d.set_item("reseed_rebuilds", s.counters.reseed_rebuilds)?;
        Ok(d.unbind())
    }
    fn items(&self) -> Vec<(String, String)> {
        self.fib
            .othello()
            .iter()
            .map(|(k, id)| {
                let a = self
                    .fib
                    .action_table()
                    .get(id)
                    .map_or_else(String::new, |a| a.to_string());
                (k.fmt_name(), a)
            })
            .collect()
    }
    fn actions(&self) -> Vec<String> {
        self.fib
            .action_table()
            .iter()
            .map(|(_, a)| a.to_string())
            .collect()
    }
}

fn key_type_of(s: &str) -> PyResult<KeyType> {
    s.parse::<KeyType>()
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

fn action_str(s: &str) -> Result<Action, String> {
    s.parse::<Action>().map_err(|e| e.to_string())
}

fn action_of(s: &str) -> PyResult<Action> {
    action_str(s).map_err(PyValueError::new_err)
}

fn build_typed<K: NameKey + Send + Sync + 'static>(
    key_type: KeyType,
    cfg: Config,
    pairs: &[(String, String)],
) -> PyResult<Box<dyn Flat>> {
    let mut routes = Vec::with_capacity(pairs.len());
    for (i, (n, a)) in pairs.iter().enumerate() {
        let k = parse::<K>(n).map_err(|e| PyValueError::new_err(format!("pair {i}: {e}")))?;
        let a = action_str(a).map_err(|e| PyValueError::new_err(format!("pair {i}: {e}")))?;
        routes.push((i, k, a));
    }
    let fib = ConciseFib::build(cfg, &routes).map_err(|e| match e {
        FibError::AtLine { line, error } => PyValueError::new_err(format!("pair {line}: {error}")),
        other => UpdateError::new_err(other.to_string()),
    })?;
    let query = fib.othello().export(0);
    Ok(Box::new(Typed {
        key_type,
        fib,
        query,
    }))
}

fn open_typed<K: NameKey + Send + Sync + 'static>(cur: &Current) -> PyResult<Box<dyn Flat>> {
    let control = cur
        .read_verified(CONTROL)
        .map_err(|e| FormatError::new_err(e.to_string()))?;
    let actions = cur
        .read_actions_text()
        .map_err(|e| FormatError::new_err(e.to_string()))?;
    let fib = ConciseFib::<K>::load_control(&control, &actions).map_err(|e| match e {
        FibError::Actions(le) => format_err(&cur.path(ACTIONS), le),
        FibError::UnknownActionId { .. } => FormatError::new_err(format!(
            "{} and {}: {e}",
            cur.path(CONTROL).display(),
            cur.path(ACTIONS).display()
        )),
        other => format_err(&cur.path(CONTROL), other),
    })?;
    let query = fib.othello().export(0);
    Ok(Box::new(Typed {
        key_type: cur.key_type,
        fib,
        query,
    }))
}

/// Why `FlatFib.open` failed: the FIB directory (OSError or FormatError)
/// or loading the generation it names (already a Python exception).
enum OpenError {
    Dir(fibdir::DirError),
    Load(PyErr),
}

impl From<fibdir::DirError> for OpenError {
    fn from(e: fibdir::DirError) -> Self {
        OpenError::Dir(e)
    }
}

macro_rules! with_key_type {
    ($kt:expr, $K:ident => $body:expr) => {
        match $kt {
            KeyType::Mac => {
                type $K = [u8; 6];
                $body
            }
            KeyType::Ipv4 => {
                type $K = Ipv4Addr;
                $body
            }
            KeyType::Ipv6 => {
                type $K = Ipv6Addr;
                $body
            }
            KeyType::U64 => {
                type $K = u64;
                $body
            }
            KeyType::Str => {
                type $K = Vec<u8>;
                $body
            }
        }
    };
}

/// A flat-name FIB (Othello / Concise): exact-match names of one key type
/// (`mac`, `ipv4`, `ipv6`, `u64`, `str`) to actions (`"3"`, `"1+3"`,
/// `"drop"`, `"controller"`).
///
/// Lookups read the data-plane structure, as the forwarder does: a name
/// that is not in the table answers some action unless the check bits
/// reject it (then `"miss"`); `get`/`in` are the exact control-plane check.
/// Safe to share between threads; batched lookups release the GIL.
#[pyclass(frozen, module = "nexthop")]
pub struct FlatFib {
    f: RwLock<Box<dyn Flat>>,
}

fn pairs_vec(pairs: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let it = if let Ok(d) = pairs.downcast::<PyDict>() {
        d.items().as_any().try_iter()?
    } else {
        pairs.try_iter()?
    };
    it.enumerate()
        .map(|(i, item)| {
            item?.extract::<(String, String)>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "pair {i}: expected a (name: str, action: str) pair"
                ))
            })
        })
        .collect()
}

#[pymethods]
impl FlatFib {
    /// Build from pairs `(name, action)` (an iterable or a dict) of key type
    /// `key_type`, with the options of `nexthop fib build`: `value_bits`
    /// (l), `check_bits` (r, the alien-key check), `sizing` (`"pow2"` or
    /// `"tight"`), `seed`.
    ///
    /// Raises ValueError naming the pair for a malformed name or action or
    /// a name given twice.
    #[staticmethod]
    #[pyo3(signature = (pairs, key_type, value_bits = 8, check_bits = 0, sizing = "pow2", seed = None))]
    fn build(
        py: Python<'_>,
        pairs: &Bound<'_, PyAny>,
        key_type: &str,
        value_bits: u8,
        check_bits: u8,
        sizing: &str,
        seed: Option<u64>,
    ) -> PyResult<FlatFib> {
        let kt = key_type_of(key_type)?;
        let sizing: Sizing = sizing
            .parse()
            .map_err(|e| PyValueError::new_err(format!("invalid sizing '{sizing}': {e}")))?;
        let cfg = Config {
            value_bits,
            check_bits,
            sizing,
            seed: seed.unwrap_or(Config::default().seed),
            ..Config::default()
        };
        cfg.validate()
            .map_err(|e| PyValueError::new_err(format!("invalid configuration: {e}")))?;
        let pairs = pairs_vec(pairs)?;
        let f = py.allow_threads(|| with_key_type!(kt, K => build_typed::<K>(kt, cfg, &pairs)))?;
        Ok(FlatFib { f: RwLock::new(f) })
    }

    /// Open the FIB directory that `nexthop fib build` or `save` wrote
    /// (its current generation, checksums verified).
    ///
    /// Raises OSError when it cannot be read, nexthop.FormatError when it
    /// is not a FIB directory or is corrupted.
    #[staticmethod]
    fn open(py: Python<'_>, dir: PathBuf) -> PyResult<FlatFib> {
        std::fs::metadata(&dir).map_err(|e| os_err(&dir, e))?;
        // A generation replaced by a concurrent save or `nexthop fib update`
        // while it is read: resolve `current` again once (fibdir keeps the
        // previous generations for a while, so this is rare).
        let f = py
            .allow_threads(|| {
                fibdir::open_retrying(&dir, |cur| {
                    with_key_type!(cur.key_type, K => open_typed::<K>(&cur))
                        .map_err(OpenError::Load)
                })
            })
            .map_err(|e| match e {
                OpenError::Dir(e @ fibdir::DirError::Io { .. }) => {
                    pyo3::exceptions::PyOSError::new_err(e.to_string())
                }
                OpenError::Dir(other) => FormatError::new_err(other.to_string()),
                OpenError::Load(e) => e,
            })?;
        Ok(FlatFib { f: RwLock::new(f) })
    }

    /// Write the FIB as a new generation of the directory `dir` (created if
    /// absent; an existing FIB there is replaced atomically); `nexthop fib
    /// lookup --fib DIR` reads it. Returns the generation.
    fn save(&self, py: Python<'_>, dir: PathBuf) -> PyResult<u64> {
        py.allow_threads(|| read(&self.f).save(&dir))
    }

    /// The action of `name` (data plane, as `nexthop fib lookup`), `"miss"`
    /// when the check bits reject it. Raises ValueError for a malformed name.
    fn lookup(&self, name: String) -> PyResult<String> {
        let f = read(&self.f);
        let ids = f
            .lookup_many(std::slice::from_ref(&name))
            .map_err(|e| PyValueError::new_err(e.replacen("names[0]: ", "", 1)))?;
        Ok(f.action(ids[0]).unwrap_or_else(|| MISS_TEXT.to_string()))
    }

    /// Batched `lookup` of a list of names with the GIL released. Raises
    /// ValueError naming the first malformed name (`names[i]`); nothing is
    /// looked up then.
    fn lookup_many(&self, py: Python<'_>, names: Vec<String>) -> PyResult<Vec<String>> {
        py.allow_threads(|| {
            let f = read(&self.f);
            let ids = f.lookup_many(&names).map_err(PyValueError::new_err)?;
            Ok(ids
                .into_iter()
                .map(|id| f.action(id).unwrap_or_else(|| MISS_TEXT.to_string()))
                .collect())
        })
    }

    /// Batched lookups returning raw action ids (`nexthop.MISS` for a
    /// rejected name) as a numpy uint64 array; resolve them with
    /// `actions()`. Takes a numpy uint64 array for key type `u64` (read in
    /// place, GIL released) or a list of names for any key type.
    fn lookup_many_raw<'py>(
        &self,
        py: Python<'py>,
        names: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        if let Ok(a) = names.downcast::<PyArray1<u64>>() {
            let a = a.readonly();
            let out = PyArray1::<u64>::zeros(py, a.len(), false);
            let ok = {
                // SAFETY: `out` was created above and is referenced nowhere
                // else, so this is the only view of its memory.
                let o = unsafe { out.as_slice_mut() }.expect("a new array is contiguous");
                let copy;
                let input = match a.as_slice() {
                    Ok(s) => s,
                    Err(_) => {
                        copy = a.as_array().iter().copied().collect::<Vec<u64>>();
                        &copy[..]
                    }
                };
                py.allow_threads(|| read(&self.f).lookup_u64(input, o))
            };
            if !ok {
                return Err(PyTypeError::new_err(format!(
                    "a numpy uint64 array needs key type u64, this FIB's is {}",
                    read(&self.f).key_type()
                )));
            }
            return Ok(out);
        }
        if names.downcast::<numpy::PyUntypedArray>().is_ok() {
            return Err(PyTypeError::new_err(
                "lookup_many_raw takes a 1-dimensional numpy uint64 array or a list of names",
            ));
        }
        let names: Vec<String> = names.extract()?;
        let ids = py
            .allow_threads(|| read(&self.f).lookup_many(&names))
            .map_err(PyValueError::new_err)?;
        Ok(PyArray1::from_vec(py, ids))
    }

    /// Benchmark hook (not a lookup API): the Rust batch rate of this FIB
    /// (key type `u64`) on `keys` (a numpy uint64 array, copied once), in
    /// lookups per second: `Query::lookup_batch` on consecutive batches of
    /// `batch` keys, the call `lookup_many_raw` makes, timed in Rust with
    /// the GIL released; the best of `rounds` passes.
    #[pyo3(signature = (keys, rounds = 3, batch = 4096))]
    fn _native_batch_rate(
        &self,
        py: Python<'_>,
        keys: numpy::PyReadonlyArray1<'_, u64>,
        rounds: usize,
        batch: usize,
    ) -> PyResult<f64> {
        if rounds == 0 || batch == 0 || keys.len() == 0 {
            return Err(PyValueError::new_err(
                "rounds, batch and the number of keys must be positive",
            ));
        }
        let input = keys.as_array().iter().copied().collect::<Vec<u64>>();
        let rate = py.allow_threads(|| {
            let f = read(&self.f);
            let mut out = vec![0u64; batch];
            let mut ok = true;
            let r = crate::lpm::best_rate(rounds, input.len(), || {
                for k in input.chunks(batch) {
                    ok &= f.lookup_u64(k, &mut out[..k.len()]);
                    std::hint::black_box(&out);
                }
            });
            ok.then_some(r)
        });
        rate.ok_or_else(|| {
            PyTypeError::new_err(format!(
                "the native batch rate needs key type u64, this FIB's is {}",
                read(&self.f).key_type()
            ))
        })
    }

    /// The action table: `actions()[id]` is the action of raw id `id`.
    fn actions(&self) -> Vec<String> {
        read(&self.f).actions()
    }

    /// The exact action of `name` (control plane), None when it is not in
    /// the table. Raises ValueError for a malformed name.
    fn get(&self, name: &str) -> PyResult<Option<String>> {
        read(&self.f).get(name).map_err(PyValueError::new_err)
    }

    /// Add `name` with `action`. Raises nexthop.UpdateError when it is
    /// present, ValueError for a malformed name or action; the table is
    /// unchanged then.
    fn insert(&self, py: Python<'_>, name: &str, action: &str) -> PyResult<()> {
        let a = action_of(action)?;
        py.allow_threads(|| write(&self.f).insert(name, &a))
    }

    /// Delete `name`. Raises nexthop.UpdateError when it is absent.
    fn delete(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.allow_threads(|| write(&self.f).delete(name))
    }

    /// Change the action of `name`. Raises nexthop.UpdateError when it is
    /// absent.
    fn update(&self, py: Python<'_>, name: &str, action: &str) -> PyResult<()> {
        let a = action_of(action)?;
        py.allow_threads(|| write(&self.f).change(name, &a))
    }

    /// Statistics as `nexthop fib stats --json` (bits per key, sizes, seed,
    /// rebuild counters).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        read(&self.f).stats(py)
    }

    /// All `(name, action)` pairs in canonical text form.
    fn items(&self) -> Vec<(String, String)> {
        read(&self.f).items()
    }

    /// The key type name (`mac`, `ipv4`, `ipv6`, `u64`, `str`).
    #[getter]
    fn key_type(&self) -> &'static str {
        read(&self.f).key_type().name()
    }

    /// Number of names.
    fn __len__(&self) -> usize {
        read(&self.f).len()
    }

    /// Whether `name` is in the table (exact; False for a malformed name).
    fn __contains__(&self, name: &str) -> bool {
        matches!(read(&self.f).get(name), Ok(Some(_)))
    }

    fn __repr__(&self) -> String {
        let f = read(&self.f);
        format!(
            "<nexthop.FlatFib: {} names, key type {}>",
            f.len(),
            f.key_type()
        )
    }
}
