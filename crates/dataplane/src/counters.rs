//! Pipeline counters.
//!
//! Every frame given to [`Pipeline::process`](crate::Pipeline::process) is
//! counted once on its input port and once under exactly one of
//! `forwarded`, `dropped` or `punted`:
//!
//! ```text
//! frames_in = forwarded + dropped + punted
//! frames_in = hits.port + hits.port_set + hits.drop + hits.controller + misses
//!             + ttl_expired + malformed.total()
//! ```
//!
//! The IP pipeline ([`IpPipeline`](crate::IpPipeline)) counts a routed
//! frame under `hits.port`, a destination with no route under `misses` and
//! a frame whose TTL or hop limit ran out under `ttl_expired`.
//!
//! `tx` counts copies: a frame sent to a port set of three ports adds one
//! frame to each of the three ports (and one to `forwarded`).

use crate::error::MalformedKind;

/// Frames and bytes through one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounter {
    /// Frames.
    pub frames: u64,
    /// Bytes (whole frames as given to the pipeline).
    pub bytes: u64,
}

impl PortCounter {
    #[inline(always)]
    fn add(&mut self, bytes: u64) {
        self.frames += 1;
        self.bytes += bytes;
    }

    fn merge(&mut self, o: &PortCounter) {
        self.frames += o.frames;
        self.bytes += o.bytes;
    }
}

/// Frames whose name matched, by the kind of action.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HitCounts {
    /// `Port(n)` actions.
    pub port: u64,
    /// Port-set actions.
    pub port_set: u64,
    /// `drop` actions.
    pub drop: u64,
    /// `controller` actions.
    pub controller: u64,
}

/// Frames that could not be named, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MalformedCounts {
    counts: [u64; MalformedKind::ALL.len()],
}

impl MalformedCounts {
    /// Frames counted under `kind`.
    pub fn get(&self, kind: MalformedKind) -> u64 {
        self.counts[kind as usize]
    }

    #[inline(always)]
    fn add(&mut self, kind: MalformedKind) {
        self.counts[kind as usize] += 1;
    }

    /// All malformed frames.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(kind, count)` for every kind.
    pub fn iter(&self) -> impl Iterator<Item = (MalformedKind, u64)> + '_ {
        MalformedKind::ALL.into_iter().map(|k| (k, self.get(k)))
    }
}

/// All counters of a pipeline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames given to the pipeline.
    pub frames_in: u64,
    /// Bytes given to the pipeline.
    pub bytes_in: u64,
    /// Frames sent out of at least one port.
    pub forwarded: u64,
    /// Frames discarded: `drop` actions, misses under the drop policy
    /// (or flood with no ports), and malformed frames.
    pub dropped: u64,
    /// Frames punted to the controller: `controller` actions and misses
    /// under the controller policy.
    pub punted: u64,
    /// Names that matched, by action kind.
    pub hits: HitCounts,
    /// Names the FIB does not know (alien names, or action ids outside the
    /// action table), whatever the miss policy did with them.
    pub misses: u64,
    /// IP pipeline: frames dropped (or punted) because their IPv4 TTL or
    /// IPv6 hop limit was 0 or 1. Always 0 in the flat-name pipeline.
    pub ttl_expired: u64,
    /// Frames that could not be named, by reason.
    pub malformed: MalformedCounts,
    pub(crate) rx: Vec<PortCounter>,
    pub(crate) tx: Vec<PortCounter>,
}

impl Counters {
    /// Counters for output ports `0..=max_port`.
    pub(crate) fn with_tx_ports(max_port: Option<u16>) -> Counters {
        Counters {
            tx: vec![PortCounter::default(); max_port.map_or(0, |p| p as usize + 1)],
            ..Counters::default()
        }
    }

    #[inline(always)]
    pub(crate) fn rx_mut(&mut self, port: u16) -> &mut PortCounter {
        let i = port as usize;
        if self.rx.len() <= i {
            self.rx.resize(i + 1, PortCounter::default());
        }
        &mut self.rx[i]
    }

    #[inline(always)]
    pub(crate) fn tx_add(&mut self, port: u16, bytes: u64) {
        if let Some(c) = self.tx.get_mut(port as usize) {
            c.add(bytes);
        }
    }

    #[inline(always)]
    pub(crate) fn malformed_add(&mut self, kind: MalformedKind) {
        self.malformed.add(kind);
    }

    /// Frames and bytes received on input port `port`.
    pub fn rx(&self, port: u16) -> PortCounter {
        self.rx.get(port as usize).copied().unwrap_or_default()
    }

    /// Frames and bytes sent on output port `port`.
    pub fn tx(&self, port: u16) -> PortCounter {
        self.tx.get(port as usize).copied().unwrap_or_default()
    }

    /// Input ports that received frames, in port order.
    pub fn rx_ports(&self) -> impl Iterator<Item = (u16, PortCounter)> + '_ {
        nonzero(&self.rx)
    }

    /// Output ports that sent frames, in port order.
    pub fn tx_ports(&self) -> impl Iterator<Item = (u16, PortCounter)> + '_ {
        nonzero(&self.tx)
    }

    /// `PORT:FRAMES,...` of the input ports that received frames, `-`
    /// for none (the summary lines' `in=`).
    pub fn in_list(&self) -> String {
        crate::engine::port_list(self.rx_ports().map(|(p, pc)| (p, pc.frames)))
    }

    /// `PORT:FRAMES,...` of the output ports that sent frames, `-` for
    /// none (the summary lines' `out=`).
    pub fn out_list(&self) -> String {
        crate::engine::port_list(self.tx_ports().map(|(p, pc)| (p, pc.frames)))
    }

    /// Whether every frame was counted exactly once under forwarded,
    /// dropped or punted and under one hit kind, miss or malformed reason.
    pub fn is_consistent(&self) -> bool {
        let h = &self.hits;
        let by_outcome = self.forwarded + self.dropped + self.punted;
        let by_cause = h.port
            + h.port_set
            + h.drop
            + h.controller
            + self.misses
            + self.ttl_expired
            + self.malformed.total();
        let rx: u64 = self.rx.iter().map(|c| c.frames).sum();
        by_outcome == self.frames_in && by_cause == self.frames_in && rx == self.frames_in
    }

    /// Add `other` (say, another worker's counters) to these.
    pub fn merge(&mut self, other: &Counters) {
        self.frames_in += other.frames_in;
        self.bytes_in += other.bytes_in;
        self.forwarded += other.forwarded;
        self.dropped += other.dropped;
        self.punted += other.punted;
        self.hits.port += other.hits.port;
        self.hits.port_set += other.hits.port_set;
        self.hits.drop += other.hits.drop;
        self.hits.controller += other.hits.controller;
        self.misses += other.misses;
        self.ttl_expired += other.ttl_expired;
        for (a, b) in self.malformed.counts.iter_mut().zip(other.malformed.counts) {
            *a += b;
        }
        for (mine, theirs) in [(&mut self.rx, &other.rx), (&mut self.tx, &other.tx)] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), PortCounter::default());
            }
            for (a, b) in mine.iter_mut().zip(theirs) {
                a.merge(b);
            }
        }
    }
}

fn nonzero(v: &[PortCounter]) -> impl Iterator<Item = (u16, PortCounter)> + '_ {
    v.iter()
        .enumerate()
        .filter(|(_, c)| c.frames > 0)
        .map(|(p, c)| (p as u16, *c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_lists_name_the_ports_with_frames_in_order_or_a_dash() {
        let mut c = Counters::default();
        assert_eq!((c.in_list().as_str(), c.out_list().as_str()), ("-", "-"));
        c.tx = vec![PortCounter::default(); 4];
        c.tx[3].frames = 1;
        c.tx[1].frames = 2;
        c.rx = vec![PortCounter::default(); 1];
        c.rx[0].frames = 3;
        assert_eq!(c.out_list(), "1:2,3:1");
        assert_eq!(c.in_list(), "0:3");
    }

    #[test]
    fn merge_adds_every_counter_and_grows_port_tables() {
        let mut a = Counters::with_tx_ports(Some(1));
        a.frames_in = 2;
        a.forwarded = 2;
        a.hits.port = 2;
        a.rx_mut(0).add(100);
        a.rx_mut(0).add(100);
        a.tx_add(1, 100);
        a.tx_add(1, 100);
        let mut b = Counters::with_tx_ports(Some(3));
        b.frames_in = 1;
        b.dropped = 1;
        b.malformed_add(MalformedKind::Runt);
        b.rx_mut(2).add(10);
        b.tx_add(3, 7);
        a.merge(&b);
        assert_eq!(a.frames_in, 3);
        assert_eq!(a.malformed.get(MalformedKind::Runt), 1);
        assert_eq!(a.malformed.total(), 1);
        assert_eq!(
            a.rx_ports().collect::<Vec<_>>(),
            [
                (
                    0,
                    PortCounter {
                        frames: 2,
                        bytes: 200
                    }
                ),
                (
                    2,
                    PortCounter {
                        frames: 1,
                        bytes: 10
                    }
                )
            ]
        );
        assert_eq!(
            a.tx(3),
            PortCounter {
                frames: 1,
                bytes: 7
            }
        );
        assert!(a.is_consistent());
    }

    #[test]
    fn ports_outside_the_table_are_not_counted_and_read_as_zero() {
        let mut c = Counters::with_tx_ports(Some(2));
        c.tx_add(9, 64);
        assert_eq!(c.tx(9), PortCounter::default());
        assert_eq!(c.tx_ports().count(), 0);
        assert_eq!(c.rx(65535), PortCounter::default());
    }
}
