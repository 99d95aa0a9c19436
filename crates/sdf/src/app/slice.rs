//! Slices: several apps on one switch, each owning the traffic of a set
//! of ingress ports or of one VLAN id, each with its own share of the
//! cache and its own counters.
//!
//! A frame is demultiplexed before any cache lookup: an 802.1Q-tagged
//! frame whose VLAN id a slice owns goes to that slice; any other frame
//! goes to the slice owning its ingress port; a frame no slice owns is
//! dropped and counted ([`SlicedSwitch::unmatched`]). Each slice is a
//! [`Switch`]: its own [`DecisionCache`](crate::DecisionCache) whose
//! capacity is the slice's share, so a flood of distinct flows in one
//! slice evicts only that slice's entries, and a decision cached in one
//! slice can never answer another slice's packet (whatever bits it
//! marked). A port slice's app sees only its own ports (sending elsewhere
//! is dropped as [`DropReason::UnknownPort`](super::DropReason)); a VLAN
//! slice's app sees every port of the switch.
//!
//! A slice is written `NAME:APP:ports=1,2[:share=N]` or
//! `NAME:APP:vlan=10[:share=N]` ([`SliceSpec`]'s `FromStr`): `APP` names
//! the app for the caller to build, `share` the slice's cache entries.
//! Slices without a share split what the others left of the switch's
//! `capacity` equally; the shares may not add up to more than it.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

use super::{App, Emits, Ports, Switch};
use crate::cache::{Config, ConfigError};
use crate::key::PortId;

/// Slices one switch may have at most.
pub const MAX_SLICES: usize = 64;
/// The EtherType of an 802.1Q tag.
const TPID_8021Q: u16 = 0x8100;

/// What a slice owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceMatch {
    /// Frames received on these ports (sorted, no duplicates).
    Ports(Vec<PortId>),
    /// 802.1Q-tagged frames with this VLAN id (1..=4094), on any port.
    Vlan(u16),
}

/// One slice as written on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSpec {
    /// The slice's name (counters, logs).
    pub name: String,
    /// The app to run in it, by name.
    pub app: String,
    /// The traffic it owns.
    pub matcher: SliceMatch,
    /// Its cache entries at most (`None`: an equal part of what is left).
    pub share: Option<usize>,
}

/// A slice (or a set of slices) the switch cannot run.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SliceError {
    /// A `--slice` value that does not parse.
    #[error("slice {0:?}: expected NAME:APP:ports=P,P..|vlan=V[:share=N]: {1}")]
    Syntax(String, &'static str),
    /// No slices, or more than [`MAX_SLICES`].
    #[error("{0} slices: between 1 and {MAX_SLICES} are allowed")]
    Count(usize),
    /// Two slices with one name.
    #[error("two slices are named {0:?}")]
    DuplicateName(String),
    /// A port owned by two slices.
    #[error("port {0} belongs to two slices")]
    PortTwice(PortId),
    /// A VLAN id owned by two slices.
    #[error("vlan {0} belongs to two slices")]
    VlanTwice(u16),
    /// A slice's port the switch does not have.
    #[error("slice {0:?}: port {1} does not exist")]
    UnknownPort(String, PortId),
    /// Shares of 0, or adding up to more than the cache's capacity, or
    /// leaving nothing for the slices without one.
    #[error("the slices' shares ({0} entries) do not fit a cache of {1}")]
    Shares(usize, usize),
    /// The cache configuration.
    #[error("{0}")]
    Config(#[from] ConfigError),
}

impl FromStr for SliceSpec {
    type Err = SliceError;

    fn from_str(s: &str) -> Result<SliceSpec, SliceError> {
        let bad = |why| SliceError::Syntax(s.to_string(), why);
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default();
        let app = parts.next().ok_or_else(|| bad("no app"))?;
        let owns = parts.next().ok_or_else(|| bad("no ports= or vlan="))?;
        let share = parts.next();
        if parts.next().is_some() {
            return Err(bad("too many ':' fields"));
        }
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad("the name is empty or not [A-Za-z0-9_-]"));
        }
        if app.is_empty() {
            return Err(bad("the app is empty"));
        }
        let matcher = if let Some(list) = owns.strip_prefix("ports=") {
            let mut ports = list
                .split(',')
                .map(|p| {
                    p.parse::<PortId>()
                        .map_err(|_| bad("a port is not a number"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            ports.sort_unstable();
            ports.dedup();
            SliceMatch::Ports(ports)
        } else if let Some(v) = owns.strip_prefix("vlan=") {
            match v.parse::<u16>() {
                Ok(v) if (1..=4094).contains(&v) => SliceMatch::Vlan(v),
                _ => return Err(bad("the vlan id is not 1..=4094")),
            }
        } else {
            return Err(bad("the third field is neither ports= nor vlan="));
        };
        let share = match share {
            None => None,
            Some(f) => match f.strip_prefix("share=").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Some(n),
                _ => return Err(bad("share= wants a positive number of entries")),
            },
        };
        Ok(SliceSpec {
            name: name.to_string(),
            app: app.to_string(),
            matcher,
            share,
        })
    }
}

impl std::fmt::Display for SliceMatch {
    /// `ports=1,2` or `vlan=10`, as a [`SliceSpec`] writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SliceMatch::Ports(ports) => {
                f.write_str("ports=")?;
                for (i, p) in ports.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
            SliceMatch::Vlan(v) => write!(f, "vlan={v}"),
        }
    }
}

impl std::fmt::Display for SliceSpec {
    /// `NAME:APP:ports=P,..|vlan=V[:share=N]`: what [`SliceSpec::from_str`]
    /// parses back to the same spec.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.name, self.app, self.matcher)?;
        if let Some(n) = self.share {
            write!(f, ":share={n}")?;
        }
        Ok(())
    }
}

/// One slice's counters ([`SlicedSwitch::counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SliceCounters {
    /// Packets demultiplexed to the slice.
    pub packets: u64,
    /// Answered by the slice's cache.
    pub hits: u64,
    /// Missed the slice's cache.
    pub misses: u64,
    /// Calls of the slice's app.
    pub app_calls: u64,
    /// Packets dropped with a reason (the app's and the cached
    /// primitives').
    pub drops: u64,
    /// Entries in the slice's cache now.
    pub entries: usize,
    /// The slice's share (its cache's capacity).
    pub share: usize,
    /// Entries evicted from the slice's cache.
    pub evictions: u64,
}

#[derive(Debug)]
struct Slice<A> {
    name: String,
    matcher: SliceMatch,
    switch: Switch<A>,
}

/// Slices on one switch, on the caller's thread.
#[derive(Debug)]
pub struct SlicedSwitch<A> {
    slices: Vec<Slice<A>>,
    demux: SliceDemux,
    unmatched: u64,
}

/// The VLAN id of an 802.1Q-tagged Ethernet frame.
pub fn vlan_of(frame: &[u8]) -> Option<u16> {
    match frame.get(12..16) {
        Some(t) if u16::from_be_bytes([t[0], t[1]]) == TPID_8021Q => {
            Some(u16::from_be_bytes([t[2], t[3]]) & 0x0fff)
        }
        _ => None,
    }
}

/// Which slice a frame belongs to: the ports and VLAN ids each slice
/// owns (built and checked by [`plan_slices`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceDemux {
    by_port: HashMap<PortId, usize>,
    by_vlan: HashMap<u16, usize>,
}

impl SliceDemux {
    /// The slice a frame received on `in_port` belongs to: its VLAN's
    /// slice if it is tagged with one a slice owns, else its port's.
    pub fn slice_of(&self, in_port: PortId, frame: &[u8]) -> Option<usize> {
        vlan_of(frame)
            .and_then(|v| self.by_vlan.get(&v))
            .or_else(|| self.by_port.get(&in_port))
            .copied()
    }
}

/// One slice as [`plan_slices`] laid it out.
#[derive(Clone, Debug)]
pub struct PlannedSlice {
    /// Its name.
    pub name: String,
    /// The app to run in it, by name.
    pub app: String,
    /// What it owns.
    pub matcher: SliceMatch,
    /// Its cache's configuration (`capacity`: its share).
    pub cache: Config,
    /// The ports its app sees: its own for a port slice, the switch's for
    /// a VLAN slice.
    pub ports: Ports,
}

/// Slices laid out on a switch: the demultiplexer and each slice's cache
/// configuration and ports, in the order of the specs.
#[derive(Clone, Debug)]
pub struct SlicePlan {
    /// Which slice a frame belongs to.
    pub demux: SliceDemux,
    /// The slices.
    pub slices: Vec<PlannedSlice>,
}

/// Lay `specs` out on a switch with `ports` whose cache is `cfg`:
/// `cfg.capacity` is split into the slices' shares (the slices without a
/// share split what the others left equally), every other setting is each
/// slice's own. Checks the count, names, ports, VLAN ids and shares.
pub fn plan_slices(
    cfg: Config,
    ports: &Ports,
    specs: &[SliceSpec],
) -> Result<SlicePlan, SliceError> {
    cfg.validate()?;
    if specs.is_empty() || specs.len() > MAX_SLICES {
        return Err(SliceError::Count(specs.len()));
    }
    let given = specs
        .iter()
        .filter_map(|s| s.share)
        .try_fold(0usize, usize::checked_add)
        .ok_or(SliceError::Shares(usize::MAX, cfg.capacity))?;
    let unshared = specs.iter().filter(|s| s.share.is_none()).count();
    let left = cfg.capacity.checked_sub(given);
    let equal = match (left, unshared) {
        (Some(_), 0) => 0,
        (Some(l), n) if l / n > 0 => l / n,
        _ => return Err(SliceError::Shares(given, cfg.capacity)),
    };
    let mut demux = SliceDemux::default();
    let mut out: Vec<PlannedSlice> = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        if out.iter().any(|s| s.name == spec.name) {
            return Err(SliceError::DuplicateName(spec.name.clone()));
        }
        let slice_ports = match &spec.matcher {
            SliceMatch::Ports(list) => {
                for &p in list {
                    if !ports.contains(p) {
                        return Err(SliceError::UnknownPort(spec.name.clone(), p));
                    }
                    if demux.by_port.insert(p, i).is_some() {
                        return Err(SliceError::PortTwice(p));
                    }
                }
                Ports::physical(list)
            }
            SliceMatch::Vlan(v) => {
                if demux.by_vlan.insert(*v, i).is_some() {
                    return Err(SliceError::VlanTwice(*v));
                }
                ports.clone()
            }
        };
        let cache = Config {
            capacity: spec.share.unwrap_or(equal),
            ..cfg
        };
        cache.validate()?;
        out.push(PlannedSlice {
            name: spec.name.clone(),
            app: spec.app.clone(),
            matcher: spec.matcher.clone(),
            cache,
            ports: slice_ports,
        });
    }
    Ok(SlicePlan { demux, slices: out })
}

impl<A: App> SlicedSwitch<A> {
    /// A switch with `ports` whose slices are `slices` (each with its
    /// app), laid out by [`plan_slices`].
    /// `caching` false sends every packet to its slice's app.
    pub fn new(
        cfg: Config,
        ports: &Ports,
        slices: Vec<(SliceSpec, A)>,
        caching: bool,
    ) -> Result<SlicedSwitch<A>, SliceError> {
        let specs: Vec<SliceSpec> = slices.iter().map(|(s, _)| s.clone()).collect();
        let plan = plan_slices(cfg, ports, &specs)?;
        let mut out = Vec::with_capacity(slices.len());
        for (p, (_, app)) in plan.slices.into_iter().zip(slices) {
            out.push(Slice {
                name: p.name,
                matcher: p.matcher,
                switch: Switch::new(app, p.cache, p.ports, caching)?,
            });
        }
        Ok(SlicedSwitch {
            slices: out,
            demux: plan.demux,
            unmatched: 0,
        })
    }

    /// Slices.
    pub fn len(&self) -> usize {
        self.slices.len()
    }

    /// Whether there are no slices (never: [`Self::new`] wants one).
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// Slice `i`'s name.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.slices.get(i).map(|s| s.name.as_str())
    }

    /// What slice `i` owns.
    pub fn matcher(&self, i: usize) -> Option<&SliceMatch> {
        self.slices.get(i).map(|s| &s.matcher)
    }

    /// Slice `i`'s switch (its cache, app and ports).
    pub fn slice(&self, i: usize) -> Option<&Switch<A>> {
        self.slices.get(i).map(|s| &s.switch)
    }

    /// Slice `i`'s switch, to change its app's state from outside.
    pub fn slice_mut(&mut self, i: usize) -> Option<&mut Switch<A>> {
        self.slices.get_mut(i).map(|s| &mut s.switch)
    }

    /// The slice a frame received on `in_port` belongs to: its VLAN's
    /// slice if it is tagged with one a slice owns, else its port's.
    pub fn slice_of(&self, in_port: PortId, frame: &[u8]) -> Option<usize> {
        self.demux.slice_of(in_port, frame)
    }

    /// Frames no slice owned (dropped).
    pub fn unmatched(&self) -> u64 {
        self.unmatched
    }

    /// Slice `i`'s counters.
    pub fn counters(&mut self, i: usize) -> Option<SliceCounters> {
        let s = self.slices.get_mut(i)?;
        let sw = *s.switch.counters();
        let stats = s.switch.stats();
        Some(SliceCounters {
            packets: sw.packets,
            hits: sw.hits,
            misses: sw.misses,
            app_calls: stats.app.app_calls,
            drops: stats.app.drops.total() + sw.hit_drops.total(),
            entries: stats.entries,
            share: s.switch.cache().config().capacity,
            evictions: stats.cache.evictions,
        })
    }

    /// Forward `frame` received on `in_port` through its slice: the
    /// frames to send (none when no slice owns it).
    pub fn process(&mut self, in_port: PortId, frame: &[u8]) -> Emits {
        match self.slice_of(in_port, frame) {
            Some(i) => self.slices[i].switch.process(in_port, frame),
            None => {
                self.unmatched += 1;
                Emits::new()
            }
        }
    }

    /// Advance every slice's clock ([`Switch::tick`]).
    pub fn tick(&mut self, now: Duration) {
        for s in &mut self.slices {
            s.switch.tick(now);
        }
    }
}

impl<T: App + ?Sized> App for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn on_packet(
        &mut self,
        pkt: &mut super::InPkt,
        ctl: &mut super::Control<'_>,
    ) -> Result<(), super::AppError> {
        (**self).on_packet(pkt, ctl)
    }

    fn on_tick(&mut self, ctl: &mut super::Control<'_>) {
        (**self).on_tick(ctl)
    }

    fn control_filter(&self) -> super::ControlFilter {
        (**self).control_filter()
    }
}
