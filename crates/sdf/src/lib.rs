//! Software-defined forwarding (Moon et al., "Bridging the
//! Software/Hardware Forwarding Divide"): forwarding logic written as
//! ordinary software, with packets moved at the speed of a cache of that
//! software's decisions.
//!
//! This crate is the decision cache, with no I/O:
//!
//! * [`HeaderKey`]: a frame's first [`KEY_BYTES`] bytes and its ingress
//!   port; [`Mask`]: the bits (and whether the port) a decision used
//!   (`mark`, `mark_ingress`, `unmark`, `clear`).
//! * [`DecisionCache`]: an exact-match front over the whole key, then
//!   tuple-space wildcard subtables (one per distinct mask, probed most-hit
//!   first, stopping at the first hit), LRU capacity, a mask cap with
//!   admission control, and an index from [`StateId`] to the entries that
//!   registered it so [`DecisionCache::removed`] revokes exactly those.
//! * [`Actions`]: outputs (ports, port sets, drop, the control port), byte
//!   rewrites and the arithmetic [`Primitive`]s (TTL / hop-limit decrement
//!   with the RFC 1624 incremental checksum update), applied to a frame
//!   buffer by [`Actions::apply`].
//!
//! * [`app`]: the paper's API (§6.1): the [`app::App`] trait the switch
//!   calls on a miss, `InPkt` marks, `OutPkt` registrations and
//!   destinations, `Control`; [`app::Switch`], the cache in front of an app
//!   on one thread; [`app::L2Switch`], a learning switch;
//!   [`app::SlicedSwitch`], several apps on one switch, each owning the
//!   traffic of a port set or a VLAN id with its own share of the cache.
//!
//! A worker looks frames up in batches ([`DecisionCache::lookup_batch`])
//! and applies the hit entries' actions; on a miss the app decides, and the
//! API layer installs a [`Decision`] built from the packet's marks and the
//! state ids the app registered ([`DecisionCache::install`]). A decision
//! with no marks and no state is not cached.
//!
//! ```
//! use nexthop_sdf::{Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, StateIds};
//!
//! let mut cache = DecisionCache::new(Config::default()).unwrap();
//! let route = cache.new_state_id().unwrap();
//! let frame = [0x02u8; 60];
//! let key = HeaderKey::from_frame(&frame, 1);
//! assert_eq!(cache.lookup(&key), None);
//!
//! // The app looked at the destination MAC only and used one route.
//! let mut mask = Mask::new();
//! mask.mark_bytes(0, 6).unwrap();
//! let d = Decision { mask, states: StateIds::from_slice(&[route]), actions: Actions::output(3) };
//! let Installed::Cached(_) = cache.install(&key, &d).unwrap() else { panic!() };
//!
//! // Any frame with that destination MAC now hits, whatever else it holds.
//! let mut other = [0x77u8; 60];
//! other[..6].copy_from_slice(&[0x02; 6]);
//! let hit = cache.lookup(&HeaderKey::from_frame(&other, 9)).unwrap();
//! assert_eq!(cache.actions(hit).unwrap().ports(), &[3]);
//!
//! // The route changed: its decisions are revoked.
//! assert_eq!(cache.removed(route), 1);
//! assert_eq!(cache.lookup(&key), None);
//! ```
#![forbid(unsafe_code)]

pub mod action;
pub mod app;
pub mod cache;
pub mod key;
mod seeded;

pub use action::{ActionError, Actions, Outcome, Primitive, SetBytes, MAX_PORTS};
pub use cache::{
    Config, ConfigError, Counters, Decision, DecisionCache, EntryId, InstallError, Installed,
    NotCached, StateError, StateId, StateIds, BATCH,
};
pub use key::{HeaderKey, MarkError, Mask, PortId, KEY_BITS, KEY_BYTES, KEY_WORDS};
