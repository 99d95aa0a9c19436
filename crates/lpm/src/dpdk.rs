//! DPDK 22.11's `rte_lpm` (IPv4, DIR-24-8) and `rte_lpm6` (IPv6, 24-bit
//! first stage then 8-bit tbl8 steps) behind a safe API, as a side-by-side
//! baseline for the benchmark (`benches/lpm.rs`) and the differential test
//! (`tests/dpdk.rs`). Only built with the `dpdk` feature, which needs
//! Debian's `libdpdk-dev` and `pkg-config`; nothing in the default build
//! depends on it.
//!
//! The calls go through a C shim (`dpdk/shim.c`, compiled by `build.rs`)
//! because `rte_lpm_lookup`, `rte_lpm_lookup_bulk` and `rte_errno` are
//! static inline functions or macros in DPDK's headers.
//!
//! **EAL.** DPDK needs its environment abstraction layer initialised once
//! per process. [`init_eal`] does it on first use (the constructors call
//! it) with [`DEFAULT_EAL_ARGS`], or with the whitespace-separated
//! arguments of the environment variable [`EAL_ARGS_ENV`] when set; a
//! failure is remembered and returned to every later caller. EAL pins the
//! calling thread to its main lcore; the shim restores the thread's
//! previous CPU affinity, so later threads of the process are not all put
//! on one core.
//!
//! **Next hops.** `rte_lpm` stores 24-bit next hops and `rte_lpm6` 21-bit
//! ones; `add` refuses larger values with [`DpdkError::NextHopTooLarge`]
//! (the RouteViews tables loaded with `NextHopMode::Asn` use 1..=250).
//! Lookups return [`NO_ROUTE`] on a miss, as the crate's own tables do.
//! Neither library takes a `/0` rule ([`DpdkError::DefaultRoute`]).
//!
//! **Concurrency.** Lookups (`&self`) only read the tables and may run on
//! any number of threads at once; `add` and `delete` take `&mut self`.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::addr::{NextHop, Prefix4, Prefix6, NO_ROUTE};

/// EAL arguments used when [`EAL_ARGS_ENV`] is not set: no hugepages, no
/// PCI scan, main lcore 0, 1536 MiB of ordinary memory, no shared config
/// files, no telemetry socket, EAL log messages only on errors.
pub const DEFAULT_EAL_ARGS: &[&str] = &[
    "--no-huge",
    "--no-pci",
    "-l",
    "0",
    "-m",
    "1536",
    "--no-shconf",
    "--no-telemetry",
    "--log-level=lib.eal:error",
];

/// Environment variable that replaces [`DEFAULT_EAL_ARGS`]
/// (whitespace-separated arguments, without the program name).
pub const EAL_ARGS_ENV: &str = "NEXTHOP_DPDK_EAL_ARGS";

/// Largest next hop `rte_lpm` can store (24 bits).
pub const LPM4_MAX_NEXT_HOP: NextHop = (1 << 24) - 1;
/// Largest next hop `rte_lpm6` can store (21 bits).
pub const LPM6_MAX_NEXT_HOP: NextHop = (1 << 21) - 1;

/// Linux errno values DPDK returns (negated) from updates.
const EINVAL: c_int = 22;
const ENOENT: c_int = 2;
const E2BIG: c_int = 7;

/// What went wrong in a DPDK call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DpdkError {
    /// `rte_eal_init` failed (or failed earlier in this process).
    #[error("DPDK EAL initialisation with {args:?} failed: {msg} (errno {errno}); set {EAL_ARGS_ENV} to other EAL arguments")]
    EalInit {
        /// The arguments given to EAL (program name excluded).
        args: Vec<String>,
        /// `rte_errno`.
        errno: i32,
        /// DPDK's text for `errno`.
        msg: String,
    },
    /// An EAL argument contains a NUL byte.
    #[error("EAL argument {0:?} contains a NUL byte")]
    BadEalArg(String),
    /// `rte_lpm_create` / `rte_lpm6_create` failed.
    #[error("{family}_create(max_rules {max_rules}, number_tbl8s {number_tbl8s}) failed: {msg} (errno {errno})")]
    Create {
        /// `rte_lpm` or `rte_lpm6`.
        family: &'static str,
        /// The requested rule capacity.
        max_rules: u32,
        /// The requested tbl8 group count.
        number_tbl8s: u32,
        /// `rte_errno`.
        errno: i32,
        /// DPDK's text for `errno`.
        msg: String,
    },
    /// The next hop does not fit the library's next-hop field.
    #[error("next hop {next_hop} of {prefix} exceeds {family}'s largest next hop {max}")]
    NextHopTooLarge {
        /// `rte_lpm` or `rte_lpm6`.
        family: &'static str,
        /// The prefix being added.
        prefix: String,
        /// The refused value.
        next_hop: NextHop,
        /// The largest value the library stores.
        max: NextHop,
    },
    /// A `/0` rule: neither `rte_lpm` nor `rte_lpm6` accepts depth 0.
    #[error("{family} does not accept the default route {prefix} (depth 0)")]
    DefaultRoute {
        /// `rte_lpm` or `rte_lpm6`.
        family: &'static str,
        /// The refused prefix.
        prefix: String,
    },
    /// `rte_lpm_add` / `rte_lpm6_add` / `..._delete` failed; `ENOSPC` means
    /// the rule table or the tbl8 groups are full.
    #[error("{op}({prefix}) failed: {msg} (errno {errno})")]
    Update {
        /// The DPDK function.
        op: &'static str,
        /// The prefix.
        prefix: String,
        /// The negated return value.
        errno: i32,
        /// DPDK's text for `errno`.
        msg: String,
    },
}

/// Opaque `struct rte_lpm`.
#[repr(C)]
struct RteLpm {
    _private: [u8; 0],
}

/// Opaque `struct rte_lpm6`.
#[repr(C)]
struct RteLpm6 {
    _private: [u8; 0],
}

// The shim's functions (`dpdk/shim.c`); see there for the conventions.
extern "C" {
    fn nh_dpdk_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn nh_dpdk_strerror(err: c_int) -> *const c_char;
    fn nh_dpdk_heap_bytes() -> u64;

    fn nh_lpm_create(
        name: *const c_char,
        max_rules: u32,
        number_tbl8s: u32,
        err: *mut c_int,
    ) -> *mut RteLpm;
    fn nh_lpm_free(lpm: *mut RteLpm);
    fn nh_lpm_add(lpm: *mut RteLpm, ip: u32, depth: u8, next_hop: u32) -> c_int;
    fn nh_lpm_delete(lpm: *mut RteLpm, ip: u32, depth: u8) -> c_int;
    fn nh_lpm_lookup(lpm: *const RteLpm, ip: u32, next_hop: *mut u32) -> c_int;
    fn nh_lpm_lookup_bulk(lpm: *const RteLpm, ips: *const u32, out: *mut u32, n: usize) -> usize;

    fn nh_lpm6_create(
        name: *const c_char,
        max_rules: u32,
        number_tbl8s: u32,
        err: *mut c_int,
    ) -> *mut RteLpm6;
    fn nh_lpm6_free(lpm: *mut RteLpm6);
    fn nh_lpm6_add(lpm: *mut RteLpm6, ip: *const [u8; 16], depth: u8, next_hop: u32) -> c_int;
    fn nh_lpm6_delete(lpm: *mut RteLpm6, ip: *const [u8; 16], depth: u8) -> c_int;
    fn nh_lpm6_lookup(lpm: *const RteLpm6, ip: *const [u8; 16], next_hop: *mut u32) -> c_int;
    fn nh_lpm6_lookup_bulk(
        lpm: *const RteLpm6,
        ips: *mut [u8; 16],
        next_hops: *mut i32,
        n: c_uint,
    ) -> c_int;
}

/// DPDK's message for a positive errno value.
fn strerror(err: c_int) -> String {
    // SAFETY: 1. `rte_strerror` accepts any value and returns a pointer to
    // a NUL-terminated string (a static table entry or a per-lcore buffer),
    // never NULL.
    let p = unsafe { nh_dpdk_strerror(err) };
    if p.is_null() {
        return format!("errno {err}");
    }
    // SAFETY: 2. `p` is non-null and NUL-terminated (1.); it is copied
    // out at once, before any other DPDK call on this thread could reuse
    // the buffer.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Held across every table's creation and release, so the heap bytes
/// counted across a creation ([`measured`]) are that table's alone.
static HEAP: Mutex<()> = Mutex::new(());

/// `create()` and the DPDK heap bytes it allocated (see
/// `nh_dpdk_heap_bytes` in the shim).
fn measured<T>(create: impl FnOnce() -> T) -> (T, usize) {
    let _g = HEAP.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: 1. EAL is initialised (callers run `init_eal` first); the
    // function only reads DPDK's heap statistics, under their own locks.
    let before = unsafe { nh_dpdk_heap_bytes() };
    let t = create();
    // SAFETY: as above (1.).
    let after = unsafe { nh_dpdk_heap_bytes() };
    (
        t,
        usize::try_from(after.saturating_sub(before)).unwrap_or(usize::MAX),
    )
}

static EAL: OnceLock<Result<(), DpdkError>> = OnceLock::new();

/// Initialise DPDK's EAL once per process (see the module docs for the
/// arguments); every call returns the result of the first.
pub fn init_eal() -> Result<(), DpdkError> {
    EAL.get_or_init(|| {
        let args: Vec<String> = match std::env::var(EAL_ARGS_ENV) {
            Ok(s) => s.split_whitespace().map(str::to_owned).collect(),
            Err(_) => DEFAULT_EAL_ARGS.iter().map(|s| (*s).to_owned()).collect(),
        };
        let mut c_args = Vec::with_capacity(args.len() + 1);
        for a in std::iter::once("nexthop-lpm").chain(args.iter().map(String::as_str)) {
            c_args.push(CString::new(a).map_err(|_| DpdkError::BadEalArg(a.to_owned()))?);
        }
        // EAL may keep pointers to its arguments and permutes `argv`: hand
        // it strings and an array that live for the rest of the process.
        let argv: &'static mut [*mut c_char] = Vec::leak(
            c_args
                .into_iter()
                .map(CString::into_raw)
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = c_int::try_from(argv.len() - 1).map_err(|_| DpdkError::EalInit {
            args: args.clone(),
            errno: E2BIG,
            msg: "too many arguments".into(),
        })?;
        // SAFETY: 1. `argv` holds `argc` valid NUL-terminated strings and
        // a final NULL, all leaked so they outlive EAL; 2. this closure runs
        // at most once per process (`OnceLock`), and `rte_eal_init` is
        // called nowhere else in the crate.
        let rc = unsafe { nh_dpdk_eal_init(argc, argv.as_mut_ptr()) };
        if rc != 0 {
            return Err(DpdkError::EalInit {
                args,
                errno: rc,
                msg: strerror(rc),
            });
        }
        Ok(())
    })
    .clone()
}

/// A process-unique object name (DPDK names must be unique and fit in 32
/// bytes including `rte_lpm6`'s `LRH_` prefix for its rule hash).
fn unique_name(kind: &str) -> CString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("nh_{kind}_{n}")).expect("no NUL in a formatted name")
}

/// A DPDK size for `n` items (saturating; the library then refuses the
/// size with a clear `Create` error).
fn capacity(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Turn a negative return value of an update into a typed error.
fn update_error(op: &'static str, prefix: impl std::fmt::Display, rc: c_int) -> DpdkError {
    let errno = rc.saturating_neg();
    DpdkError::Update {
        op,
        prefix: prefix.to_string(),
        errno,
        msg: strerror(errno),
    }
}

/// DPDK's `rte_lpm` (IPv4).
#[derive(Debug)]
pub struct DpdkLpm4 {
    lpm: NonNull<RteLpm>,
    /// DPDK heap bytes of the table ([`Self::memory_bytes`]).
    bytes: usize,
}

// SAFETY: 1. the table is owned by this value alone (not shared by name:
// names are unique) and DPDK's memory is not tied to the creating thread,
// so it may be used and freed from another thread.
unsafe impl Send for DpdkLpm4 {}
// SAFETY: 2. `&self` methods only read the table (`rte_lpm_lookup*` write
// nothing); every writer takes `&mut self`, so readers and writers never
// overlap.
unsafe impl Sync for DpdkLpm4 {}

impl DpdkLpm4 {
    const FAMILY: &'static str = "rte_lpm";

    /// A table for up to `max_rules` prefixes using at most `number_tbl8s`
    /// tbl8 groups (one per `/24` that holds a longer prefix); initialises
    /// EAL on first use.
    pub fn new(max_rules: u32, number_tbl8s: u32) -> Result<Self, DpdkError> {
        init_eal()?;
        let name = unique_name("lpm4");
        let mut err: c_int = 0;
        let (p, bytes) = measured(|| {
            // SAFETY: 1. EAL is initialised (above); 2. `name` is a valid
            // NUL-terminated string that DPDK copies; 3. `err` is a valid
            // `int` to write to.
            unsafe { nh_lpm_create(name.as_ptr(), max_rules, number_tbl8s, &mut err) }
        });
        match NonNull::new(p) {
            Some(lpm) => Ok(DpdkLpm4 { lpm, bytes }),
            None => Err(DpdkError::Create {
                family: Self::FAMILY,
                max_rules,
                number_tbl8s,
                errno: err,
                msg: strerror(err),
            }),
        }
    }

    /// A table holding `routes`, sized for them: `max_rules` = route
    /// count, one tbl8 group per distinct `/24` holding a longer prefix.
    pub fn from_routes(routes: &[(Prefix4, NextHop)]) -> Result<Self, DpdkError> {
        let groups: HashSet<u32> = routes
            .iter()
            .filter(|(p, _)| p.len() > 24)
            .map(|(p, _)| p.addr() >> 8)
            .collect();
        let mut t = Self::new(capacity(routes.len()), capacity(groups.len()).max(1))?;
        for &(p, nh) in routes {
            t.add(p, nh)?;
        }
        Ok(t)
    }

    /// Add (or replace) `p -> nh`.
    pub fn add(&mut self, p: Prefix4, nh: NextHop) -> Result<(), DpdkError> {
        if nh > LPM4_MAX_NEXT_HOP {
            return Err(DpdkError::NextHopTooLarge {
                family: Self::FAMILY,
                prefix: p.to_string(),
                next_hop: nh,
                max: LPM4_MAX_NEXT_HOP,
            });
        }
        if p.is_empty() {
            return Err(DpdkError::DefaultRoute {
                family: Self::FAMILY,
                prefix: p.to_string(),
            });
        }
        // SAFETY: 1. `self.lpm` is a live table (freed only in `drop`);
        // 2. `&mut self` excludes concurrent lookups; 3. depth is 1..=32.
        let rc = unsafe { nh_lpm_add(self.lpm.as_ptr(), p.addr(), p.len(), nh) };
        if rc < 0 {
            return Err(update_error("rte_lpm_add", p, rc));
        }
        Ok(())
    }

    /// Remove `p`; `Ok(false)` when it was not in the table.
    pub fn delete(&mut self, p: Prefix4) -> Result<bool, DpdkError> {
        if p.is_empty() {
            return Ok(false);
        }
        // SAFETY: as in `add` (1., 2., 3.).
        let rc = unsafe { nh_lpm_delete(self.lpm.as_ptr(), p.addr(), p.len()) };
        // rte_lpm_delete answers -EINVAL both for bad arguments (excluded
        // here: depth 1..=32, live table) and for a rule it does not hold.
        match rc {
            0 => Ok(true),
            rc if rc == -EINVAL => Ok(false),
            rc => Err(update_error("rte_lpm_delete", p, rc)),
        }
    }

    /// The next hop of the longest prefix covering `a`.
    #[inline]
    pub fn lookup(&self, a: u32) -> Option<NextHop> {
        let mut nh = 0u32;
        // SAFETY: 1. `self.lpm` is a live table; 2. `nh` is a valid `u32`
        // to write; 3. lookups only read the table (see `Sync`).
        let rc = unsafe { nh_lpm_lookup(self.lpm.as_ptr(), a, &mut nh) };
        (rc == 0).then_some(nh)
    }

    /// Bytes of DPDK heap the table took when created (measured: the
    /// heaps' allocated bytes before and after `rte_lpm_create`). That is
    /// all of it: the 2^24-entry `tbl24` (64 MiB), `number_tbl8s` groups
    /// of 256 entries and `max_rules` rules, sized at creation, so adds and
    /// deletes do not change it.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// `rte_lpm_lookup_bulk` over `addrs` in chunks of 32, writing next
    /// hops ([`NO_ROUTE`] on a miss) to `out`; handles the first
    /// `min(addrs.len(), out.len())` addresses and returns the hit count.
    #[inline]
    pub fn lookup_bulk(&self, addrs: &[u32], out: &mut [NextHop]) -> usize {
        let n = addrs.len().min(out.len());
        // SAFETY: 1. `self.lpm` is a live table; 2. `addrs` has at least `n`
        // readable `u32`s and `out` at least `n` writable ones, and they do
        // not overlap (`&` and `&mut`); 3. lookups only read the table.
        unsafe { nh_lpm_lookup_bulk(self.lpm.as_ptr(), addrs.as_ptr(), out.as_mut_ptr(), n) }
    }
}

impl Drop for DpdkLpm4 {
    fn drop(&mut self) {
        let _g = HEAP.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: 1. `self.lpm` came from `rte_lpm_create` and is freed
        // exactly once, here; nothing can use it afterwards.
        unsafe { nh_lpm_free(self.lpm.as_ptr()) }
    }
}

/// DPDK's `rte_lpm6` (IPv6).
#[derive(Debug)]
pub struct DpdkLpm6 {
    lpm: NonNull<RteLpm6>,
    /// DPDK heap bytes of the table ([`Self::memory_bytes`]).
    bytes: usize,
}

// SAFETY: 1. as for `DpdkLpm4`: sole owner of a thread-independent table.
unsafe impl Send for DpdkLpm6 {}
// SAFETY: 2. as for `DpdkLpm4`: `&self` methods only read, writers take
// `&mut self`.
unsafe impl Sync for DpdkLpm6 {}

/// Addresses per `rte_lpm6_lookup_bulk_func` call (the byte-order
/// conversion buffer lives on the stack).
const CHUNK6: usize = 32;

impl DpdkLpm6 {
    const FAMILY: &'static str = "rte_lpm6";

    /// A table for up to `max_rules` prefixes using at most `number_tbl8s`
    /// tbl8 groups; initialises EAL on first use.
    pub fn new(max_rules: u32, number_tbl8s: u32) -> Result<Self, DpdkError> {
        init_eal()?;
        let name = unique_name("lpm6");
        let mut err: c_int = 0;
        let (p, bytes) = measured(|| {
            // SAFETY: as in `DpdkLpm4::new` (1., 2., 3.).
            unsafe { nh_lpm6_create(name.as_ptr(), max_rules, number_tbl8s, &mut err) }
        });
        match NonNull::new(p) {
            Some(lpm) => Ok(DpdkLpm6 { lpm, bytes }),
            None => Err(DpdkError::Create {
                family: Self::FAMILY,
                max_rules,
                number_tbl8s,
                errno: err,
                msg: strerror(err),
            }),
        }
    }

    /// A table holding `routes`, sized for them: `max_rules` = route
    /// count, and one tbl8 group per distinct node of the lookup tree that
    /// a prefix needs (its first 24, 32, 40, ... bits, for every such
    /// length shorter than the prefix).
    pub fn from_routes(routes: &[(Prefix6, NextHop)]) -> Result<Self, DpdkError> {
        let mut groups: HashSet<(u8, u128)> = HashSet::new();
        for (p, _) in routes {
            let mut b = 24;
            while b < p.len() {
                groups.insert((b, p.addr() >> (128 - u32::from(b))));
                b += 8;
            }
        }
        let mut t = Self::new(capacity(routes.len()), capacity(groups.len()).max(1))?;
        for &(p, nh) in routes {
            t.add(p, nh)?;
        }
        Ok(t)
    }

    /// Add (or replace) `p -> nh`.
    pub fn add(&mut self, p: Prefix6, nh: NextHop) -> Result<(), DpdkError> {
        if nh > LPM6_MAX_NEXT_HOP {
            return Err(DpdkError::NextHopTooLarge {
                family: Self::FAMILY,
                prefix: p.to_string(),
                next_hop: nh,
                max: LPM6_MAX_NEXT_HOP,
            });
        }
        if p.is_empty() {
            return Err(DpdkError::DefaultRoute {
                family: Self::FAMILY,
                prefix: p.to_string(),
            });
        }
        let ip = p.addr().to_be_bytes();
        // SAFETY: 1. `self.lpm` is a live table; 2. `&mut self` excludes
        // concurrent lookups; 3. `ip` is 16 readable bytes; depth 1..=128.
        let rc = unsafe { nh_lpm6_add(self.lpm.as_ptr(), &ip, p.len(), nh) };
        if rc < 0 {
            return Err(update_error("rte_lpm6_add", p, rc));
        }
        Ok(())
    }

    /// Remove `p`; `Ok(false)` when it was not in the table.
    pub fn delete(&mut self, p: Prefix6) -> Result<bool, DpdkError> {
        if p.is_empty() {
            return Ok(false);
        }
        let ip = p.addr().to_be_bytes();
        // SAFETY: as in `add` (1., 2., 3.).
        let rc = unsafe { nh_lpm6_delete(self.lpm.as_ptr(), &ip, p.len()) };
        // rte_lpm6_delete answers -ENOENT for a rule it does not hold
        // (-EINVAL only for arguments excluded here).
        match rc {
            0 => Ok(true),
            rc if rc == -ENOENT => Ok(false),
            rc => Err(update_error("rte_lpm6_delete", p, rc)),
        }
    }

    /// The next hop of the longest prefix covering `a`.
    #[inline]
    pub fn lookup(&self, a: u128) -> Option<NextHop> {
        let ip = a.to_be_bytes();
        let mut nh = 0u32;
        // SAFETY: 1. `self.lpm` is a live table; 2. `ip` is 16 readable
        // bytes and `nh` a writable `u32`; 3. lookups only read the table.
        let rc = unsafe { nh_lpm6_lookup(self.lpm.as_ptr(), &ip, &mut nh) };
        (rc == 0).then_some(nh)
    }

    /// Bytes of DPDK heap the table took when created (measured as for
    /// [`DpdkLpm4::memory_bytes`]): `tbl24`, the `number_tbl8s` groups and
    /// the rules' hash table, all sized at creation.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// `rte_lpm6_lookup_bulk_func` over `addrs` in chunks of 32 (each
    /// chunk converted to network-order bytes first), writing next hops
    /// ([`NO_ROUTE`] on a miss) to `out`; handles the first
    /// `min(addrs.len(), out.len())` addresses and returns the hit count.
    pub fn lookup_bulk(&self, addrs: &[u128], out: &mut [NextHop]) -> usize {
        let n = addrs.len().min(out.len());
        let mut ips = [[0u8; 16]; CHUNK6];
        let mut hits = 0;
        for (a, o) in addrs[..n].chunks(CHUNK6).zip(out[..n].chunks_mut(CHUNK6)) {
            for (ip, x) in ips.iter_mut().zip(a) {
                *ip = x.to_be_bytes();
            }
            // `int32_t` and `u32` have the same size and alignment; -1 (a
            // miss) reads back as u32::MAX = NO_ROUTE, and hits are 21-bit
            // values, identical in both types.
            let next_hops = o.as_mut_ptr().cast::<i32>();
            // SAFETY: 1. `self.lpm` is a live table; 2. `ips` holds at least
            // `a.len()` (<= 32) addresses and `o` has exactly `a.len()`
            // writable 4-byte slots, not overlapping `ips`; 3. the length
            // fits `c_uint`; 4. lookups only read the table. The call only
            // fails (-EINVAL) for NULL arguments, which these are not.
            unsafe {
                nh_lpm6_lookup_bulk(
                    self.lpm.as_ptr(),
                    ips.as_mut_ptr(),
                    next_hops,
                    a.len() as c_uint,
                );
            }
            hits += o.iter().filter(|&&h| h != NO_ROUTE).count();
        }
        hits
    }
}

impl Drop for DpdkLpm6 {
    fn drop(&mut self) {
        let _g = HEAP.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: 1. `self.lpm` came from `rte_lpm6_create` and is freed
        // exactly once, here.
        unsafe { nh_lpm6_free(self.lpm.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BinaryTrie;

    fn p4(a: u32, l: u8) -> Prefix4 {
        Prefix4::new(a, l).expect("valid length")
    }

    fn p6(a: u128, l: u8) -> Prefix6 {
        Prefix6::new(a, l).expect("valid length")
    }

    #[test]
    fn lpm4_basic_and_errors() {
        let mut t = DpdkLpm4::new(1024, 256).expect("EAL and rte_lpm");
        t.add(p4(0x0a00_0000, 8), 1).unwrap();
        t.add(p4(0x0a01_0000, 16), 2).unwrap();
        t.add(p4(0x0a01_0203, 32), LPM4_MAX_NEXT_HOP).unwrap();
        assert_eq!(t.lookup(0x0a02_0000), Some(1));
        assert_eq!(t.lookup(0x0a01_0204), Some(2));
        assert_eq!(t.lookup(0x0a01_0203), Some(LPM4_MAX_NEXT_HOP));
        assert_eq!(t.lookup(0x0b00_0000), None);
        let a = [
            0x0a02_0000,
            0x0a01_0204,
            0x0a01_0203,
            0x0b00_0000,
            0x0a00_0001,
        ];
        let mut out = [0; 5];
        assert_eq!(t.lookup_bulk(&a, &mut out), 4);
        assert_eq!(out, [1, 2, LPM4_MAX_NEXT_HOP, NO_ROUTE, 1]);
        assert!(matches!(
            t.add(p4(0x0c00_0000, 8), LPM4_MAX_NEXT_HOP + 1),
            Err(DpdkError::NextHopTooLarge { .. })
        ));
        assert!(matches!(
            t.add(p4(0, 0), 1),
            Err(DpdkError::DefaultRoute { .. })
        ));
        assert_eq!(t.delete(p4(0x0a01_0000, 16)), Ok(true));
        assert_eq!(t.delete(p4(0x0a01_0000, 16)), Ok(false));
        assert_eq!(t.lookup(0x0a01_0204), Some(1));
    }

    #[test]
    fn lpm4_full_table_is_an_error() {
        let mut t = DpdkLpm4::new(4, 256).expect("EAL and rte_lpm");
        for i in 0..4 {
            t.add(p4(i << 24, 8), 1).unwrap();
        }
        match t.add(p4(9 << 24, 8), 1) {
            Err(DpdkError::Update { op, errno, .. }) => {
                assert_eq!(op, "rte_lpm_add");
                assert!(errno > 0);
            }
            other => panic!("expected an Update error, got {other:?}"),
        }
    }

    #[test]
    fn lpm6_basic_and_errors() {
        let mut t = DpdkLpm6::new(1024, 1024).expect("EAL and rte_lpm6");
        let base = 0x2001_0db8u128 << 96;
        t.add(p6(base, 32), 7).unwrap();
        t.add(p6(base | (0xabcd << 80), 48), 8).unwrap();
        t.add(p6(base | 1, 128), LPM6_MAX_NEXT_HOP).unwrap();
        assert_eq!(t.lookup(base | 5), Some(7));
        assert_eq!(t.lookup(base | (0xabcd << 80) | 9), Some(8));
        assert_eq!(t.lookup(base | 1), Some(LPM6_MAX_NEXT_HOP));
        assert_eq!(t.lookup(1), None);
        // 70 addresses: two full chunks and a tail.
        let addrs: Vec<u128> = (0..70u128)
            .map(|i| match i % 4 {
                0 => base | (i << 8),
                1 => base | (0xabcd << 80) | i,
                2 => base | 1,
                _ => i,
            })
            .collect();
        let mut out = vec![0; 70];
        let hits = t.lookup_bulk(&addrs, &mut out);
        let want: Vec<NextHop> = addrs
            .iter()
            .map(|&a| t.lookup(a).unwrap_or(NO_ROUTE))
            .collect();
        assert_eq!(out, want);
        assert_eq!(hits, want.iter().filter(|&&h| h != NO_ROUTE).count());
        assert!(matches!(
            t.add(p6(base, 32), LPM6_MAX_NEXT_HOP + 1),
            Err(DpdkError::NextHopTooLarge { .. })
        ));
        assert!(matches!(
            t.add(p6(0, 0), 1),
            Err(DpdkError::DefaultRoute { .. })
        ));
        assert_eq!(t.delete(p6(base | (0xabcd << 80), 48)), Ok(true));
        assert_eq!(t.delete(p6(base | (0xabcd << 80), 48)), Ok(false));
        assert_eq!(t.lookup(base | (0xabcd << 80) | 9), Some(7));
    }

    #[test]
    fn bulk_output_shorter_than_input() {
        let mut t = DpdkLpm4::new(16, 16).expect("EAL and rte_lpm");
        t.add(p4(0x0a00_0000, 8), 3).unwrap();
        let mut out = [0; 2];
        assert_eq!(t.lookup_bulk(&[0x0a00_0000; 40], &mut out), 2);
        assert_eq!(out, [3, 3]);
        let mut t6 = DpdkLpm6::new(16, 16).expect("EAL and rte_lpm6");
        t6.add(p6(1 << 127, 1), 4).unwrap();
        let mut out = [0; 3];
        assert_eq!(t6.lookup_bulk(&[1 << 127; 40], &mut out), 3);
        assert_eq!(out, [4, 4, 4]);
    }

    #[test]
    fn matches_trie_after_random_updates() {
        // Small seeded xorshift: the library has no rand dependency.
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut t = DpdkLpm4::new(4096, 1024).expect("EAL and rte_lpm");
        let mut oracle = BinaryTrie::new();
        let mut added = Vec::new();
        for i in 0..3000 {
            if i % 5 == 4 && !added.is_empty() {
                let p = added.swap_remove(next() as usize % added.len());
                assert_eq!(t.delete(p), Ok(oracle.remove(p).is_some()));
                continue;
            }
            // Lengths 1..=32, addresses in a few /8s so prefixes nest.
            let len = 1 + (next() % 32) as u8;
            let a = ((next() % 4) as u32) << 24 | (next() as u32 & 0x00ff_ffff);
            let p = p4(a, len);
            let nh = 1 + (next() % 1000) as u32;
            t.add(p, nh).unwrap();
            oracle.insert(p, nh);
            added.push(p);
        }
        let addrs: Vec<u32> = (0..20_000)
            .map(|_| ((next() % 5) as u32) << 24 | (next() as u32 & 0x00ff_ffff))
            .collect();
        let mut out = vec![0; addrs.len()];
        t.lookup_bulk(&addrs, &mut out);
        for (&a, &o) in addrs.iter().zip(&out) {
            let want = oracle.lookup(a);
            assert_eq!(t.lookup(a), want, "{a:#x}");
            assert_eq!(o, want.unwrap_or(NO_ROUTE), "{a:#x}");
        }
    }
}
