//! The flat-name switching pipeline: name → batched FIB lookup → action.
//!
//! [`Pipeline::process`] takes a batch of frames from one input port and
//! returns one [`Decision`] per frame; [`Pipeline::egress`] turns a decision
//! into what the port layer must do (send on ports, punt, discard). The
//! pipeline does no I/O, so pcap files (this crate's [`pcap`](crate::pcap)
//! module) and live ports drive the same code.
//!
//! Per batch of [`BATCH`] frames:
//!
//! 1. every frame is named by the [`NameSource`] (frames that cannot be
//!    named get [`Decision::Malformed`] and take no part in the lookup);
//! 2. the names go to one [`NameTable::lookup_batch`] call, which hashes
//!    them all and prefetches their slots before reading any;
//! 3. each action id is resolved through a table precomputed from the FIB's
//!    [`ActionTable`]; [`MISS`] (the alien check rejected the name) or an id
//!    outside the table is a miss, handled by the [`MissPolicy`].
//!
//! # Threading
//! A `Pipeline` is owned by one worker (`process` takes `&mut self` for the
//! counters). Workers share the FIB by giving each pipeline a reference to
//! one table ([`NameTable`] is implemented for `&T`); a [`Query`] can take
//! deltas while pipelines read it. When the action table changes (a new FIB
//! generation), build a new pipeline and carry the counters over with
//! [`Pipeline::take_counters`] / [`Pipeline::set_counters`], or keep the
//! pipeline and swap its parts between batches:
//! [`Pipeline::replace_table`] and [`Pipeline::set_actions`] (what a
//! forwarder following a controller does; the table a batch starts with is
//! the one all its lookups use).

use std::fmt;
use std::str::FromStr;

use nexthop_othello::fib::{Action, ActionTable, KeyType};
use nexthop_othello::{Query, QueryView, MISS};
use nexthop_wire::FIVE_TUPLE_LEN;
use thiserror::Error;

use crate::counters::Counters;
use crate::error::{ConfigError, FrameError};
use crate::name::NameSource;

/// Frames per batched lookup.
pub const BATCH: usize = 32;

/// Default maximum frame length: 256 KiB, libpcap's largest snapshot
/// length, so no frame of a valid capture is refused.
pub const DEFAULT_MAX_FRAME_LEN: usize = 262_144;

/// A FIB data plane that answers batched lookups of raw-byte names.
///
/// `out[i]` receives the action id of `names[i]`, or [`MISS`]; the return
/// value is the number of hits. Implementations must not panic for any
/// names, and callers give an `out` as long as `names`.
pub trait NameTable {
    /// Look `names` up.
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize;
}

impl NameTable for QueryView<'_> {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        QueryView::lookup_batch(self, names, out)
    }
}

impl NameTable for Query {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        Query::lookup_batch(self, names, out)
    }
}

impl NameTable for nexthop_othello::owner::PackedOwnerMap {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        nexthop_othello::owner::PackedOwnerMap::lookup_batch(self, names, out)
    }
}

impl<T: NameTable + ?Sized> NameTable for &T {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        (**self).lookup_batch(names, out)
    }
}

/// What to do with a frame whose name the FIB does not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MissPolicy {
    /// Discard it.
    #[default]
    Drop,
    /// Punt it to the controller.
    Controller,
    /// Send a copy on every port of the action table.
    Flood,
}

impl fmt::Display for MissPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MissPolicy::Drop => "drop",
            MissPolicy::Controller => "controller",
            MissPolicy::Flood => "flood",
        })
    }
}

/// A miss policy string that is not `drop`, `controller` or `flood`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid miss policy '{0}' (expected drop, controller or flood)")]
pub struct ParseMissPolicyError(pub String);

impl FromStr for MissPolicy {
    type Err = ParseMissPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "drop" => Ok(MissPolicy::Drop),
            "controller" => Ok(MissPolicy::Controller),
            "flood" => Ok(MissPolicy::Flood),
            _ => Err(ParseMissPolicyError(s.to_string())),
        }
    }
}

/// How a pipeline names frames and handles misses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Which bytes of a frame are its name.
    pub name: NameSource,
    /// What to do with unknown names.
    pub miss: MissPolicy,
    /// Longer frames are malformed ([`FrameError::Oversize`]).
    pub max_frame_len: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            name: NameSource::DstMac,
            miss: MissPolicy::Drop,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
    }
}

/// What the pipeline decided for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The name matched `Port(n)`: send on port `n`.
    Port(u16),
    /// The name matched a port set: send a copy on each of its ports
    /// ([`Pipeline::egress`] lists them). `action` is the action id.
    PortSet {
        /// Action id in the FIB's action table.
        action: usize,
    },
    /// The name matched `drop`.
    Drop,
    /// The name matched `controller`.
    Controller,
    /// The FIB does not know the name; the [`MissPolicy`] says what
    /// happens.
    Miss,
    /// The frame could not be named; it is dropped.
    Malformed(FrameError),
}

/// What the port layer does with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress<'a> {
    /// Send a copy on each port (one or more).
    Ports(&'a [u16]),
    /// Punt to the controller.
    Controller,
    /// Discard.
    Discard,
}

/// An action, resolved for the hot path.
#[derive(Clone, Copy, Debug)]
enum Resolved {
    Port(u16),
    /// `set_ports[start..start + len]`.
    PortSet {
        start: u32,
        len: u32,
    },
    Drop,
    Controller,
}

/// The flat-name switching pipeline over the name table `T`.
pub struct Pipeline<T> {
    table: T,
    cfg: PipelineConfig,
    key_type: KeyType,
    /// Indexed by action id.
    actions: Vec<Resolved>,
    /// Members of every port set, concatenated.
    set_ports: Vec<u16>,
    /// Every port of the action table, sorted.
    flood: Vec<u16>,
    counters: Counters,
}

impl<T> fmt::Debug for Pipeline<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("cfg", &self.cfg)
            .field("key_type", &self.key_type)
            .field("actions", &self.actions.len())
            .field("flood", &self.flood)
            .finish_non_exhaustive()
    }
}

impl<T: NameTable> Pipeline<T> {
    /// A pipeline looking names up in `table`, whose values are ids into
    /// `actions`; `key_type` is the key type the FIB was built with.
    ///
    /// # Errors
    /// [`ConfigError::NameLength`] when the name source's names cannot be
    /// keys of `key_type`; [`ConfigError::NameBeyondMaxFrame`] when no
    /// frame within `cfg.max_frame_len` can carry a name.
    pub fn new(
        table: T,
        actions: &ActionTable,
        key_type: KeyType,
        cfg: PipelineConfig,
    ) -> Result<Pipeline<T>, ConfigError> {
        cfg.name.check_key_type(key_type)?;
        let needed = cfg.name.min_frame_len();
        if needed > cfg.max_frame_len {
            return Err(ConfigError::NameBeyondMaxFrame {
                name: cfg.name,
                needed,
                max: cfg.max_frame_len,
            });
        }
        let (resolved, set_ports, flood) = resolve_actions(actions);
        let counters = Counters::with_tx_ports(flood.last().copied());
        Ok(Pipeline {
            table,
            cfg,
            key_type,
            actions: resolved,
            set_ports,
            flood,
            counters,
        })
    }

    /// Decide for each frame of `frames`, received on `in_port`;
    /// `decisions` is cleared and gets one decision per frame, in order.
    /// Counters are updated.
    pub fn process<F: AsRef<[u8]>>(
        &mut self,
        in_port: u16,
        frames: &[F],
        decisions: &mut Vec<Decision>,
    ) {
        decisions.clear();
        decisions.reserve(frames.len());
        for chunk in frames.chunks(BATCH) {
            self.decide_chunk(chunk, decisions);
        }
        self.count(in_port, frames, decisions);
    }

    fn decide_chunk<F: AsRef<[u8]>>(&self, chunk: &[F], decisions: &mut Vec<Decision>) {
        let base = decisions.len();
        let mut scratch = [[0u8; FIVE_TUPLE_LEN]; BATCH];
        let mut names: [&[u8]; BATCH] = [&[]; BATCH];
        let mut which = [0usize; BATCH];
        let mut n = 0;
        for ((i, frame), s) in chunk.iter().enumerate().zip(scratch.iter_mut()) {
            match self
                .cfg
                .name
                .extract(frame.as_ref(), s, self.cfg.max_frame_len)
            {
                Ok(name) => {
                    names[n] = name;
                    which[n] = i;
                    n += 1;
                    decisions.push(Decision::Miss);
                }
                Err(e) => decisions.push(Decision::Malformed(e)),
            }
        }
        let mut ids = [MISS; BATCH];
        self.table.lookup_batch(&names[..n], &mut ids[..n]);
        for (&id, &i) in ids[..n].iter().zip(&which[..n]) {
            if let Some(d) = decisions.get_mut(base + i) {
                *d = self.resolve(id);
            }
        }
    }

    /// The decision for action id `id` ([`MISS`] or outside the table: a miss).
    #[inline(always)]
    fn resolve(&self, id: u64) -> Decision {
        match usize::try_from(id).ok().and_then(|i| self.actions.get(i)) {
            Some(Resolved::Port(p)) => Decision::Port(*p),
            Some(Resolved::PortSet { .. }) => Decision::PortSet {
                action: id as usize,
            },
            Some(Resolved::Drop) => Decision::Drop,
            Some(Resolved::Controller) => Decision::Controller,
            None => Decision::Miss,
        }
    }

    fn count<F: AsRef<[u8]>>(&mut self, in_port: u16, frames: &[F], decisions: &[Decision]) {
        let Pipeline {
            cfg,
            actions,
            set_ports,
            flood,
            counters: c,
            ..
        } = self;
        let mut rx_frames = 0u64;
        let mut rx_bytes = 0u64;
        for (f, d) in frames.iter().zip(decisions) {
            let bytes = f.as_ref().len() as u64;
            rx_frames += 1;
            rx_bytes += bytes;
            match d {
                Decision::Port(_) => c.hits.port += 1,
                Decision::PortSet { .. } => c.hits.port_set += 1,
                Decision::Drop => c.hits.drop += 1,
                Decision::Controller => c.hits.controller += 1,
                Decision::Miss => c.misses += 1,
                Decision::Malformed(e) => c.malformed_add(e.kind()),
            }
            match egress_of(actions, set_ports, flood, cfg.miss, d) {
                Egress::Ports(ports) => {
                    c.forwarded += 1;
                    for &p in ports {
                        c.tx_add(p, bytes);
                    }
                }
                Egress::Controller => c.punted += 1,
                Egress::Discard => c.dropped += 1,
            }
        }
        c.frames_in += rx_frames;
        c.bytes_in += rx_bytes;
        let rx = c.rx_mut(in_port);
        rx.frames += rx_frames;
        rx.bytes += rx_bytes;
    }
}

impl<T> Pipeline<T> {
    /// What the port layer does with a frame that got decision `d`.
    #[inline]
    pub fn egress<'a>(&'a self, d: &'a Decision) -> Egress<'a> {
        egress_of(
            &self.actions,
            &self.set_ports,
            &self.flood,
            self.cfg.miss,
            d,
        )
    }

    /// The configuration.
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    /// The FIB key type the pipeline was built for.
    pub fn key_type(&self) -> KeyType {
        self.key_type
    }

    /// The name table.
    pub fn table(&self) -> &T {
        &self.table
    }

    /// Every port of the action table (the flood set), sorted.
    pub fn ports(&self) -> &[u16] {
        &self.flood
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Take the counters, leaving zeroed ones.
    pub fn take_counters(&mut self) -> Counters {
        let fresh = Counters::with_tx_ports(self.flood.last().copied());
        std::mem::replace(&mut self.counters, fresh)
    }

    /// Continue from `counters` (taken from a previous pipeline).
    pub fn set_counters(&mut self, counters: Counters) {
        let mut c = Counters::with_tx_ports(self.flood.last().copied());
        c.merge(&counters);
        self.counters = c;
    }

    /// Look names up in `table` from the next [`process`](Self::process)
    /// call on; returns the previous table. The action resolution is kept:
    /// when `table`'s ids index another action table, follow with
    /// [`set_actions`](Self::set_actions).
    pub fn replace_table(&mut self, table: T) -> T {
        std::mem::replace(&mut self.table, table)
    }

    /// Resolve action ids through `actions` from the next
    /// [`process`](Self::process) call on (a grown or replaced action
    /// table). Counters are kept; the flood set becomes `actions`' ports.
    /// Costs one pass over `actions`: call it when the table changes, not
    /// per frame.
    pub fn set_actions(&mut self, actions: &ActionTable) {
        let (resolved, set_ports, flood) = resolve_actions(actions);
        self.actions = resolved;
        self.set_ports = set_ports;
        self.flood = flood;
        let counters = std::mem::take(&mut self.counters);
        self.set_counters(counters);
    }
}

/// Resolve every action of `actions` for the hot path: the resolved
/// actions (indexed by id), the concatenated port-set members and the
/// sorted flood set.
fn resolve_actions(actions: &ActionTable) -> (Vec<Resolved>, Vec<u16>, Vec<u16>) {
    let mut resolved = Vec::with_capacity(actions.len());
    let mut set_ports = Vec::new();
    let mut flood = Vec::new();
    for (_, a) in actions.iter() {
        resolved.push(match a {
            Action::Port(p) => {
                flood.push(*p);
                Resolved::Port(*p)
            }
            Action::PortSet(ps) => {
                let start = set_ports.len() as u32;
                set_ports.extend_from_slice(ps);
                flood.extend_from_slice(ps);
                Resolved::PortSet {
                    start,
                    len: ps.len() as u32,
                }
            }
            Action::Drop => Resolved::Drop,
            Action::Controller => Resolved::Controller,
        });
    }
    flood.sort_unstable();
    flood.dedup();
    (resolved, set_ports, flood)
}

fn egress_of<'a>(
    actions: &'a [Resolved],
    set_ports: &'a [u16],
    flood: &'a [u16],
    miss: MissPolicy,
    d: &'a Decision,
) -> Egress<'a> {
    match d {
        Decision::Port(p) => Egress::Ports(std::slice::from_ref(p)),
        Decision::PortSet { action } => match actions.get(*action) {
            Some(Resolved::PortSet { start, len }) => {
                let (s, l) = (*start as usize, *len as usize);
                match set_ports.get(s..s + l) {
                    Some(ports) => Egress::Ports(ports),
                    None => Egress::Discard,
                }
            }
            _ => Egress::Discard,
        },
        Decision::Drop | Decision::Malformed(_) => Egress::Discard,
        Decision::Controller => Egress::Controller,
        Decision::Miss => match miss {
            MissPolicy::Drop => Egress::Discard,
            MissPolicy::Controller => Egress::Controller,
            MissPolicy::Flood if flood.is_empty() => Egress::Discard,
            MissPolicy::Flood => Egress::Ports(flood),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use nexthop_othello::fib::ConciseFib;
    use nexthop_othello::Config;
    use nexthop_wire::WireError;
    use rand::Rng;

    use super::*;
    use crate::error::MalformedKind;

    const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];

    /// A 60-byte frame to `dst` whose payload starts with `tag`.
    fn frame(dst: [u8; 6], tag: u32) -> Vec<u8> {
        let mut f = Vec::with_capacity(60);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&SRC);
        f.extend_from_slice(&[0x88, 0xb5]);
        f.extend_from_slice(&tag.to_be_bytes());
        f.resize(60, 0);
        f
    }

    fn mac(last: u8) -> [u8; 6] {
        [0x02, 0, 0, 0, 0, last]
    }

    fn mac_fib(routes: &[([u8; 6], Action)]) -> ConciseFib<[u8; 6]> {
        let cfg = Config {
            check_bits: 16,
            ..Config::default()
        };
        let r: Vec<_> = routes
            .iter()
            .enumerate()
            .map(|(i, (k, a))| (i + 1, *k, a.clone()))
            .collect();
        ConciseFib::build(cfg, &r).unwrap()
    }

    fn sample_fib() -> ConciseFib<[u8; 6]> {
        mac_fib(&[
            (mac(1), Action::Port(1)),
            (mac(2), Action::Port(2)),
            (mac(3), Action::PortSet(vec![1, 3])),
            (mac(4), Action::Drop),
            (mac(5), Action::Controller),
            (mac(6), Action::Port(7)),
        ])
    }

    fn pipeline<'q>(
        fib: &ConciseFib<[u8; 6]>,
        q: &'q Query,
        miss: MissPolicy,
    ) -> Pipeline<&'q Query> {
        let cfg = PipelineConfig {
            miss,
            ..PipelineConfig::default()
        };
        Pipeline::new(q, fib.action_table(), KeyType::Mac, cfg).unwrap()
    }

    #[test]
    fn swapped_table_and_grown_actions_take_effect_on_the_next_batch() {
        let old = mac_fib(&[(mac(1), Action::Port(1)), (mac(2), Action::Port(2))]);
        let q_old = old.othello().export(0);
        let new = mac_fib(&[
            (mac(1), Action::Port(2)),
            (mac(2), Action::Port(2)),
            (mac(9), Action::PortSet(vec![3, 4])),
        ]);
        let q_new = new.othello().export(0);
        let mut p = pipeline(&old, &q_old, MissPolicy::Drop);
        let frames = [frame(mac(1), 1), frame(mac(9), 2)];
        let mut d = Vec::new();
        p.process(0, &frames, &mut d);
        assert_eq!(d[0], Decision::Port(1));
        assert_eq!(p.ports(), &[1, 2]);

        let prev = p.replace_table(&q_new);
        assert!(std::ptr::eq(prev, &q_old));
        p.set_actions(new.action_table());
        p.process(0, &frames, &mut d);
        assert_eq!(d[0], Decision::Port(2));
        assert_eq!(p.egress(&d[1]), Egress::Ports(&[3, 4]));
        assert_eq!(p.ports(), &[2, 3, 4]);
        // Counters run on across the swap, new ports included.
        let c = p.counters();
        assert_eq!(c.frames_in, 4);
        assert_eq!((c.tx(1).frames, c.tx(2).frames, c.tx(4).frames), (1, 1, 1));
    }

    #[test]
    fn known_names_get_their_actions_and_egress() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        let mut p = pipeline(&fib, &q, MissPolicy::Drop);
        let frames: Vec<Vec<u8>> = (1..=6).map(|i| frame(mac(i), i as u32)).collect();
        let mut d = Vec::new();
        p.process(0, &frames, &mut d);
        assert_eq!(d[0], Decision::Port(1));
        assert_eq!(d[1], Decision::Port(2));
        assert!(matches!(d[2], Decision::PortSet { .. }));
        assert_eq!(d[3], Decision::Drop);
        assert_eq!(d[4], Decision::Controller);
        assert_eq!(d[5], Decision::Port(7));
        let eg: Vec<Egress> = d.iter().map(|x| p.egress(x)).collect();
        assert_eq!(
            eg,
            [
                Egress::Ports(&[1]),
                Egress::Ports(&[2]),
                Egress::Ports(&[1, 3]),
                Egress::Discard,
                Egress::Controller,
                Egress::Ports(&[7]),
            ]
        );
        let c = p.counters();
        assert_eq!(c.frames_in, 6);
        assert_eq!(c.bytes_in, 360);
        assert_eq!((c.forwarded, c.dropped, c.punted, c.misses), (4, 1, 1, 0));
        assert_eq!(
            c.hits,
            crate::HitCounts {
                port: 3,
                port_set: 1,
                drop: 1,
                controller: 1
            }
        );
        let tx: Vec<(u16, u64)> = c.tx_ports().map(|(p, c)| (p, c.frames)).collect();
        assert_eq!(tx, [(1, 2), (2, 1), (3, 1), (7, 1)]);
        assert_eq!(c.rx(0).frames, 6);
        assert!(c.is_consistent());
        assert_eq!(p.ports(), &[1, 2, 3, 7]);
    }

    #[test]
    fn unknown_names_follow_the_miss_policy() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        let unknown = [frame(mac(0x80), 1), frame(mac(0x81), 2)];
        for (policy, want) in [
            (MissPolicy::Drop, Egress::Discard),
            (MissPolicy::Controller, Egress::Controller),
            (MissPolicy::Flood, Egress::Ports(&[1, 2, 3, 7])),
        ] {
            let mut p = pipeline(&fib, &q, policy);
            let mut d = Vec::new();
            p.process(2, &unknown, &mut d);
            assert_eq!(d, [Decision::Miss, Decision::Miss], "{policy}");
            assert!(d.iter().all(|x| p.egress(x) == want), "{policy}");
            let c = p.counters();
            assert_eq!(c.misses, 2);
            assert_eq!(c.rx(2).frames, 2);
            match policy {
                MissPolicy::Drop => assert_eq!(c.dropped, 2),
                MissPolicy::Controller => assert_eq!(c.punted, 2),
                MissPolicy::Flood => {
                    assert_eq!(c.forwarded, 2);
                    assert_eq!(c.tx(7).frames, 2);
                }
            }
            assert!(c.is_consistent());
        }
    }

    #[test]
    fn flood_with_no_ports_in_the_table_drops() {
        let fib = mac_fib(&[(mac(1), Action::Drop)]);
        let q = fib.othello().export(0);
        let mut p = pipeline(&fib, &q, MissPolicy::Flood);
        let mut d = Vec::new();
        p.process(0, &[frame(mac(9), 0)], &mut d);
        assert_eq!(d, [Decision::Miss]);
        assert_eq!(p.egress(&d[0]), Egress::Discard);
        assert_eq!(p.counters().dropped, 1);
    }

    /// A table that answers every name with one fixed value.
    struct Fixed(u64);

    impl NameTable for Fixed {
        fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
            out[..names.len()].fill(self.0);
            names.len()
        }
    }

    #[test]
    fn action_id_outside_the_table_is_a_miss() {
        let fib = sample_fib();
        let n = fib.action_table().len() as u64;
        for id in [n, n + 1, u64::MAX - 1, MISS] {
            let mut p = Pipeline::new(
                Fixed(id),
                fib.action_table(),
                KeyType::Mac,
                PipelineConfig::default(),
            )
            .unwrap();
            let mut d = Vec::new();
            p.process(0, &[frame(mac(1), 0)], &mut d);
            assert_eq!(d, [Decision::Miss], "id {id}");
        }
    }

    #[test]
    fn malformed_frames_are_counted_by_reason_and_dropped() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        let mut p = pipeline(&fib, &q, MissPolicy::Flood);
        let good = frame(mac(1), 0);
        let mut cut_tag = good[..16].to_vec();
        cut_tag[12..14].copy_from_slice(&[0x81, 0x00]);
        let frames: Vec<Vec<u8>> = vec![
            Vec::new(),
            good[..13].to_vec(),
            cut_tag,
            good.clone(),
            vec![0u8; DEFAULT_MAX_FRAME_LEN + 1],
        ];
        let mut d = Vec::new();
        p.process(0, &frames, &mut d);
        assert_eq!(d[0], Decision::Malformed(FrameError::Runt { got: 0 }));
        assert_eq!(d[1], Decision::Malformed(FrameError::Runt { got: 13 }));
        assert_eq!(
            d[2],
            Decision::Malformed(FrameError::Wire(WireError::Truncated {
                needed: 18,
                got: 16
            }))
        );
        assert_eq!(d[3], Decision::Port(1));
        assert!(matches!(
            d[4],
            Decision::Malformed(FrameError::Oversize { .. })
        ));
        for x in [&d[0], &d[1], &d[2], &d[4]] {
            assert_eq!(p.egress(x), Egress::Discard);
        }
        let c = p.counters();
        assert_eq!(c.malformed.get(MalformedKind::Runt), 2);
        assert_eq!(c.malformed.get(MalformedKind::Truncated), 1);
        assert_eq!(c.malformed.get(MalformedKind::Oversize), 1);
        assert_eq!(c.malformed.total(), 4);
        assert_eq!((c.dropped, c.forwarded, c.misses), (4, 1, 0));
        assert!(c.is_consistent());
    }

    #[test]
    fn name_source_must_fit_the_fib_key_type() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        for name in [
            NameSource::FiveTuple,
            NameSource::Bytes { offset: 14, len: 8 },
        ] {
            let cfg = PipelineConfig {
                name,
                ..PipelineConfig::default()
            };
            let e = Pipeline::new(&q, fib.action_table(), KeyType::Mac, cfg).unwrap_err();
            assert!(
                matches!(e, ConfigError::NameLength { expected: 6, .. }),
                "{e}"
            );
        }
        let cfg = PipelineConfig {
            name: NameSource::Bytes {
                offset: 100,
                len: 6,
            },
            max_frame_len: 64,
            ..PipelineConfig::default()
        };
        let e = Pipeline::new(&q, fib.action_table(), KeyType::Mac, cfg).unwrap_err();
        assert_eq!(
            e,
            ConfigError::NameBeyondMaxFrame {
                name: cfg.name,
                needed: 106,
                max: 64
            }
        );
    }

    /// Differential test: 2,000 frames (known, unknown and malformed, in a
    /// seeded random order, over many batches) against a HashMap oracle.
    #[test]
    fn decisions_match_a_hashmap_oracle_across_batches() {
        let names = nexthop_testutil::macs(7, 600);
        let actions = [
            Action::Port(1),
            Action::Port(2),
            Action::PortSet(vec![2, 5]),
            Action::Drop,
            Action::Controller,
        ];
        let routes: Vec<([u8; 6], Action)> = names[..500]
            .iter()
            .enumerate()
            .map(|(i, k)| (*k, actions[i % actions.len()].clone()))
            .collect();
        let oracle: HashMap<[u8; 6], Action> = routes.iter().cloned().collect();
        let fib = mac_fib(&routes);
        let q = fib.othello().export(0);
        let mut p = pipeline(&fib, &q, MissPolicy::Controller);
        let mut rng = nexthop_testutil::keys::rng(11);
        let frames: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| {
                let mut f = frame(names[rng.gen_range(0..names.len())], i);
                if rng.gen_ratio(1, 20) {
                    f.truncate(rng.gen_range(0..14));
                }
                f
            })
            .collect();
        let mut d = Vec::new();
        p.process(0, &frames, &mut d);
        assert_eq!(d.len(), frames.len());
        for (f, got) in frames.iter().zip(&d) {
            if f.len() < 14 {
                assert!(matches!(got, Decision::Malformed(FrameError::Runt { .. })));
                continue;
            }
            let dst: [u8; 6] = f[..6].try_into().unwrap();
            let want = match oracle.get(&dst) {
                None => Egress::Controller,
                Some(Action::Port(n)) => Egress::Ports(std::slice::from_ref(n)),
                Some(Action::PortSet(ps)) => Egress::Ports(ps),
                Some(Action::Drop) => Egress::Discard,
                Some(Action::Controller) => Egress::Controller,
            };
            assert_eq!(p.egress(got), want, "dst {dst:02x?}");
            assert_eq!(oracle.contains_key(&dst), *got != Decision::Miss);
        }
        assert!(p.counters().is_consistent());
    }

    #[test]
    fn mapped_snapshot_view_gives_the_same_decisions_as_the_query() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        let snap = fib.othello().snapshot(0);
        // Copy into 8-byte aligned storage, as a memory mapping would be.
        let mut words = vec![0u64; snap.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..snap.len()].copy_from_slice(&snap);
        let bytes = &bytemuck::cast_slice::<u64, u8>(&words)[..snap.len()];
        let view = QueryView::new(bytes).unwrap();
        let frames: Vec<Vec<u8>> = (0..=8).map(|i| frame(mac(i), 0)).collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pipeline(&fib, &q, MissPolicy::Drop).process(0, &frames, &mut a);
        Pipeline::new(
            view,
            fib.action_table(),
            KeyType::Mac,
            PipelineConfig::default(),
        )
        .unwrap()
        .process(0, &frames, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn five_tuple_names_look_up_in_a_str_fib() {
        let flows = nexthop_testutil::five_tuples(3, 40);
        let routes: Vec<(usize, Vec<u8>, Action)> = flows
            .iter()
            .enumerate()
            .map(|(i, t)| (i + 1, t.to_bytes().to_vec(), Action::Port(i as u16 % 4)))
            .collect();
        let cfg = Config {
            check_bits: 16,
            ..Config::default()
        };
        let fib = ConciseFib::build(cfg, &routes).unwrap();
        let q = fib.othello().export(0);
        let pcfg = PipelineConfig {
            name: NameSource::FiveTuple,
            ..PipelineConfig::default()
        };
        let mut p = Pipeline::new(&q, fib.action_table(), KeyType::Str, pcfg).unwrap();
        let frames: Vec<Vec<u8>> = flows.iter().map(ipv4_frame).collect();
        let mut d = Vec::new();
        p.process(0, &frames, &mut d);
        for (i, got) in d.iter().enumerate() {
            assert_eq!(
                *got,
                Decision::Port(i as u16 % 4),
                "flow {i}: {:?}",
                flows[i]
            );
        }
        // A non-IPv4 frame has no 5-tuple name.
        p.process(0, &[frame(mac(1), 0)], &mut d);
        assert!(matches!(d[0], Decision::Malformed(FrameError::NoName(_))));
    }

    /// An untagged IPv4 frame carrying `t` (TCP, UDP or a port-less protocol).
    fn ipv4_frame(t: &nexthop_testutil::FiveTuple) -> Vec<u8> {
        let l4: Vec<u8> = match t.proto {
            6 => {
                let mut h = vec![0u8; 20];
                h[0..2].copy_from_slice(&t.src_port.to_be_bytes());
                h[2..4].copy_from_slice(&t.dst_port.to_be_bytes());
                h[12] = 0x50;
                h
            }
            17 => {
                let mut h = vec![0u8; 8];
                h[0..2].copy_from_slice(&t.src_port.to_be_bytes());
                h[2..4].copy_from_slice(&t.dst_port.to_be_bytes());
                h[4..6].copy_from_slice(&8u16.to_be_bytes());
                h
            }
            _ => vec![0u8; 8],
        };
        let mut f = frame(mac(1), 0)[..12].to_vec();
        f.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + l4.len()) as u16;
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0, 64, t.proto, 0, 0]);
        f.extend_from_slice(&t.src.octets());
        f.extend_from_slice(&t.dst.octets());
        f.extend_from_slice(&l4);
        f
    }

    #[test]
    fn u64_fib_matches_little_endian_name_bytes() {
        let routes = vec![(1usize, 0x0102_0304_0506_0708u64, Action::Port(9))];
        let cfg = Config {
            check_bits: 16,
            ..Config::default()
        };
        let fib = ConciseFib::build(cfg, &routes).unwrap();
        let q = fib.othello().export(0);
        let pcfg = PipelineConfig {
            name: NameSource::Bytes { offset: 14, len: 8 },
            ..PipelineConfig::default()
        };
        let mut p = Pipeline::new(&q, fib.action_table(), KeyType::U64, pcfg).unwrap();
        let mut le = frame(mac(1), 0);
        le[14..22].copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        let mut be = le.clone();
        be[14..22].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        let mut d = Vec::new();
        p.process(0, &[le, be, frame(mac(1), 0)[..20].to_vec()], &mut d);
        assert_eq!(d[0], Decision::Port(9));
        assert_eq!(d[1], Decision::Miss);
        assert_eq!(
            d[2],
            Decision::Malformed(FrameError::ShortForName {
                offset: 14,
                len: 8,
                got: 20
            })
        );
    }

    #[test]
    fn counters_carry_over_to_a_new_pipeline() {
        let fib = sample_fib();
        let q = fib.othello().export(0);
        let mut p = pipeline(&fib, &q, MissPolicy::Drop);
        let mut d = Vec::new();
        p.process(0, &[frame(mac(1), 0)], &mut d);
        let taken = p.take_counters();
        assert_eq!(p.counters().frames_in, 0);
        let mut p2 = pipeline(&fib, &q, MissPolicy::Drop);
        p2.set_counters(taken);
        p2.process(0, &[frame(mac(6), 0)], &mut d);
        assert_eq!(p2.counters().frames_in, 2);
        assert_eq!(p2.counters().tx(1).frames, 1);
        assert_eq!(p2.counters().tx(7).frames, 1);
    }

    proptest::proptest! {
        /// Any bytes, any name source, any miss policy: no panic, one
        /// decision per frame, every frame counted exactly once.
        #[test]
        fn arbitrary_frames_never_panic_and_are_all_counted(
            frames in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80), 0..70),
            offset in 0usize..=58,
            policy in 0u8..3,
        ) {
            let routes: Vec<(usize, Vec<u8>, Action)> =
                vec![(1, b"abcdef".to_vec(), Action::Port(1)), (2, b"ghijkl".to_vec(), Action::PortSet(vec![2, 3]))];
            let fib = ConciseFib::build(Config::default(), &routes).unwrap();
            let q = fib.othello().export(0);
            let miss = [MissPolicy::Drop, MissPolicy::Controller, MissPolicy::Flood][policy as usize];
            for name in [NameSource::DstMac, NameSource::FiveTuple, NameSource::Bytes { offset, len: 6 }] {
                let cfg = PipelineConfig { name, miss, max_frame_len: 64 };
                let mut p = Pipeline::new(&q, fib.action_table(), KeyType::Str, cfg).unwrap();
                let mut d = Vec::new();
                p.process(1, &frames, &mut d);
                proptest::prop_assert_eq!(d.len(), frames.len());
                for x in &d {
                    let _ = p.egress(x);
                }
                proptest::prop_assert!(p.counters().is_consistent());
            }
        }
    }
}
