//! Bloom-filter IP longest-prefix match for IPv4 and IPv6 (Bloomfwd, after
//! Lucchesi, Teodoro et al., "Bloom filters IP lookup on many-core
//! processors"), with its reference baselines: a binary trie (the test
//! oracle), DIR-24-8 and MIHT.
//!
//! See the crate README for the algorithm, memory layout, invariants,
//! update procedure and concurrency contract.
//!
//! ```
//! use std::net::{Ipv4Addr, Ipv6Addr};
//! use nexthop_lpm::{BloomfwdControl, Config, Prefix, NO_ROUTE};
//!
//! let a = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
//! let routes = [
//!     (Prefix::new(a("192.0.2.0"), 24).unwrap(), 1),
//!     (Prefix::new(a("192.0.2.128"), 25).unwrap(), 2),
//! ];
//! // Control plane: RIB, counting filters, expansion.
//! let mut ctl = BloomfwdControl::build(Config::ipv4(), &routes)?;
//! assert_eq!(ctl.lookup(a("192.0.2.200")), Some(2));
//!
//! // Run-time updates: withdrawing the /25 restores the /24's expansion.
//! ctl.withdraw(Prefix::new(a("192.0.2.128"), 25).unwrap());
//! ctl.announce(Prefix::new(a("198.51.100.0"), 22).unwrap(), 7);
//!
//! // Data plane: batched lookups (SIMD hashing, prefetch); misses read NO_ROUTE.
//! let table = ctl.table();
//! let addrs = [a("192.0.2.200"), a("198.51.101.9"), a("203.0.113.1")];
//! let mut out = [0; 3];
//! assert_eq!(table.lookup_batch(&addrs, &mut out), 2);
//! assert_eq!(out, [1, 7, NO_ROUTE]);
//!
//! // IPv6: u128 addresses, expansion levels chosen by DPCPE (3 levels).
//! let b = |s: &str| u128::from(s.parse::<Ipv6Addr>().unwrap());
//! let routes6 = [(Prefix::new(b("2001:db8::"), 32).unwrap(), 4)];
//! let ctl6 = BloomfwdControl::build(Config::ipv6_dpcpe(&routes6, 3), &routes6)?;
//! assert_eq!(ctl6.lookup(b("2001:db8::1")), Some(4));
//! assert_eq!(ctl6.lookup(b("2001:db9::1")), None);
//! # Ok::<(), nexthop_lpm::ConfigError>(())
//! ```

pub mod addr;
pub mod bloomfwd;
pub mod dir248;
pub mod dpcpe;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod hash;
pub mod miht;
pub mod parse;
pub mod persist;
pub mod rib;
pub mod trie;

pub use addr::{Address, NextHop, Prefix, Prefix4, Prefix6, Route, NO_ROUTE};
pub use bloomfwd::{Bloomfwd, BloomfwdControl, Config, ConfigError, GroupStats};
pub use hash::{HashKind, Simd};
pub use trie::BinaryTrie;
