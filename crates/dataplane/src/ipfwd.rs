//! The IP forwarding pipeline: Ethernet (+VLAN) → IPv4/IPv6 → batched
//! Bloomfwd longest-prefix match → neighbour → rewritten frame.
//!
//! [`IpPipeline::process`] takes a batch of frames from one input port,
//! **rewrites the forwarded ones in place** and returns one [`IpDecision`]
//! per frame; [`IpPipeline::egress`] says what the port layer does with it
//! (the [`Egress`] of the flat-name pipeline). No I/O, no allocation per
//! batch.
//!
//! Per group of [`BATCH`] frames:
//!
//! 1. **Parse.** Ethernet, up to two VLAN tags (as [`EthernetFrame`]
//!    reads them), then by EtherType: IPv4 ([`Ipv4Packet::new_checked`]:
//!    version 4, IHL ≥ 5, total length ≥ header and within the frame; then
//!    the header checksum) or IPv6 (version 6, payload within the frame).
//!    Anything else is malformed and dropped (`not_ip`, `runt`,
//!    `truncated`, `bad_header`, `bad_checksum`, `oversize`).
//! 2. **TTL.** IPv4 TTL or IPv6 hop limit 0 or 1: dropped, counted as
//!    `ttl_expired` (no ICMP Time Exceeded is sent).
//! 3. **Look up.** All IPv4 destinations of the group go to one
//!    [`Bloomfwd::lookup_batch`] call, all IPv6 ones to another.
//! 4. **Rewrite.** No route: dropped (`misses`). Otherwise the next hop's
//!    [`Neighbor`] gives the port and the MACs: destination MAC = the
//!    neighbour's, source MAC = the port's, TTL (hop limit) − 1 and, for
//!    IPv4, the header checksum updated incrementally (RFC 1624 eqn. 3,
//!    [`Ipv4HeaderMut::decrement_ttl`]), all through `nexthop_wire`'s
//!    writable views. VLAN tags, IPv4 options and the payload are
//!    left as they are.
//!
//! # Threading
//! One `IpPipeline` per worker (`process` takes `&mut self` for the
//! counters and rewrites the caller's frames); workers share one
//! [`LpmTable`] through `&`.

use std::fmt;

use nexthop_lpm::persist::LpmTable;
use nexthop_lpm::{Bloomfwd, NextHop, NO_ROUTE};
use nexthop_wire::{
    EtherType, EthernetFrame, EthernetMut, Ipv4HeaderMut, Ipv4Packet, Ipv6HeaderMut, Ipv6Packet,
    MacAddr,
};
use thiserror::Error;

use crate::counters::Counters;
use crate::error::FrameError;
use crate::neighbors::{Neighbor, Neighbors};
use crate::pipeline::{Egress, BATCH, DEFAULT_MAX_FRAME_LEN};

/// Next hops below this are resolved through a dense index (at most 4 MiB);
/// larger ones by binary search.
const DENSE_LIMIT: NextHop = 1 << 20;

/// What the IP pipeline decided for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpDecision {
    /// Routed and rewritten: send on this port.
    Forward(u16),
    /// No route for the destination (or no neighbour for its next hop):
    /// dropped.
    NoRoute,
    /// TTL or hop limit 0 or 1: dropped.
    TtlExpired,
    /// Not a well-formed IP frame: dropped.
    Malformed(FrameError),
}

/// An IP pipeline that cannot be set up.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IpConfigError {
    /// Next hops of the table that the neighbour table lacks.
    #[error(
        "{count} next hop(s) of the LPM table have no neighbour entry: {} (add a line \
         'NEXT-HOP PORT DST-MAC SRC-MAC' for each)",
        list(.first)
    )]
    MissingNeighbors {
        /// How many.
        count: usize,
        /// The smallest ones (at most 8).
        first: Vec<NextHop>,
    },
    /// A frame of the maximum length cannot hold an IPv4 header.
    #[error("maximum frame length {0} is below 34 bytes (Ethernet + IPv4 header)")]
    MaxFrameTooSmall(usize),
}

fn list(v: &[NextHop]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Configuration of an [`IpPipeline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpConfig {
    /// Longer frames are malformed ([`FrameError::Oversize`]).
    pub max_frame_len: usize,
}

impl Default for IpConfig {
    fn default() -> Self {
        IpConfig {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
    }
}

/// Where a parsed frame's destination is, for the lookup and the rewrite.
#[derive(Clone, Copy, Debug)]
enum Dest {
    V4 { l3: usize, dst: u32 },
    V6 { l3: usize, dst: u128 },
}

/// Parse one frame far enough to route it.
#[inline]
fn classify(frame: &[u8], max: usize) -> Result<Dest, IpDecision> {
    let got = frame.len();
    if got > max {
        return Err(IpDecision::Malformed(FrameError::Oversize { got, max }));
    }
    if got < 14 {
        return Err(IpDecision::Malformed(FrameError::Runt { got }));
    }
    let eth = EthernetFrame::new_checked(frame)
        .map_err(|e| IpDecision::Malformed(FrameError::Wire(e)))?;
    let l3 = eth.header_len();
    let ethertype = eth.ethertype();
    let ip = frame.get(l3..).unwrap_or(&[]);
    let wire = |e: nexthop_wire::WireError| IpDecision::Malformed(FrameError::Wire(e.shifted(l3)));
    if ethertype == EtherType::IPV4 {
        let p = Ipv4Packet::new_checked(ip).map_err(wire)?;
        if !p.checksum_ok() {
            return Err(IpDecision::Malformed(FrameError::BadChecksum));
        }
        if p.ttl() <= 1 {
            return Err(IpDecision::TtlExpired);
        }
        let d = p.dst_bytes();
        let dst = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        Ok(Dest::V4 { l3, dst })
    } else if ethertype == EtherType::IPV6 {
        let p = Ipv6Packet::new_checked(ip).map_err(wire)?;
        if p.hop_limit() <= 1 {
            return Err(IpDecision::TtlExpired);
        }
        let mut d = [0u8; 16];
        d.copy_from_slice(p.dst_bytes());
        Ok(Dest::V6 {
            l3,
            dst: u128::from_be_bytes(d),
        })
    } else {
        Err(IpDecision::Malformed(FrameError::NotIp {
            ethertype: ethertype.0,
        }))
    }
}

/// Rewrite a parsed frame for neighbour `n`: MACs, TTL/hop limit − 1, and
/// the IPv4 checksum. The offsets were checked by [`classify`]; a frame
/// that somehow is too short is left alone rather than indexed past its
/// end.
#[inline]
fn rewrite(frame: &mut [u8], dest: Dest, n: &Neighbor) {
    if let Ok(mut eth) = EthernetMut::new(frame) {
        eth.set_dst(MacAddr(n.dst_mac));
        eth.set_src(MacAddr(n.src_mac));
    }
    match dest {
        Dest::V4 { l3, .. } => {
            if let Some(Ok(mut h)) = frame.get_mut(l3..).map(Ipv4HeaderMut::new) {
                h.decrement_ttl();
            }
        }
        Dest::V6 { l3, .. } => {
            if let Some(Ok(mut h)) = frame.get_mut(l3..).map(Ipv6HeaderMut::new) {
                h.set_hop_limit(h.hop_limit().wrapping_sub(1));
            }
        }
    }
}

/// The IP forwarding pipeline over a Bloomfwd [`LpmTable`].
pub struct IpPipeline<'t> {
    v4: &'t Bloomfwd<u32>,
    v6: &'t Bloomfwd<u128>,
    /// Next hops with a neighbour, sorted; `adj[i]` is `keys[i]`'s.
    keys: Vec<NextHop>,
    adj: Vec<Neighbor>,
    /// When every next hop is below [`DENSE_LIMIT`]: `dense[nh]` is the
    /// index of `nh` in `adj` (or `u32::MAX`), one load instead of a
    /// binary search of `keys`.
    dense: Vec<u32>,
    /// Every port of `adj`, sorted.
    ports: Vec<u16>,
    cfg: IpConfig,
    counters: Counters,
}

impl fmt::Debug for IpPipeline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpPipeline")
            .field("cfg", &self.cfg)
            .field("neighbors", &self.keys.len())
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl<'t> IpPipeline<'t> {
    /// A pipeline routing through `table` to the neighbours of
    /// `neighbors`.
    ///
    /// # Errors
    /// [`IpConfigError::MissingNeighbors`] when a next hop of the table has
    /// no neighbour entry (entries for next hops the table does not use
    /// are fine); [`IpConfigError::MaxFrameTooSmall`].
    pub fn new(
        table: &'t LpmTable,
        neighbors: &Neighbors,
        cfg: IpConfig,
    ) -> Result<IpPipeline<'t>, IpConfigError> {
        if cfg.max_frame_len < 34 {
            return Err(IpConfigError::MaxFrameTooSmall(cfg.max_frame_len));
        }
        let mut missing: Vec<NextHop> = table
            .v4
            .rib()
            .iter()
            .map(|(_, nh)| nh)
            .chain(table.v6.rib().iter().map(|(_, nh)| nh))
            .filter(|nh| neighbors.get(*nh).is_none())
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            return Err(IpConfigError::MissingNeighbors {
                count: missing.len(),
                first: missing.into_iter().take(8).collect(),
            });
        }
        let (keys, adj): (Vec<_>, Vec<_>) = neighbors.sorted().into_iter().unzip();
        let mut dense = Vec::new();
        if let Some(&max) = keys.last() {
            if max < DENSE_LIMIT {
                dense = vec![u32::MAX; max as usize + 1];
                for (i, &k) in keys.iter().enumerate() {
                    dense[k as usize] = i as u32;
                }
            }
        }
        let ports = neighbors.ports();
        let counters = Counters::with_tx_ports(ports.last().copied());
        Ok(IpPipeline {
            v4: table.v4.table(),
            v6: table.v6.table(),
            keys,
            adj,
            dense,
            ports,
            cfg,
            counters,
        })
    }

    #[inline(always)]
    fn neighbor(&self, nh: NextHop) -> Option<&Neighbor> {
        if self.dense.is_empty() {
            self.keys
                .binary_search(&nh)
                .ok()
                .and_then(|i| self.adj.get(i))
        } else {
            let i = *self.dense.get(nh as usize)?;
            self.adj.get(i as usize)
        }
    }

    /// Decide for each frame of `frames`, received on `in_port`, and
    /// rewrite the frames decided [`IpDecision::Forward`] in place (frames
    /// dropped are left as they were); `decisions` is cleared and gets one
    /// decision per frame, in order. Counters are updated.
    pub fn process<F: AsMut<[u8]>>(
        &mut self,
        in_port: u16,
        frames: &mut [F],
        decisions: &mut Vec<IpDecision>,
    ) {
        decisions.clear();
        decisions.reserve(frames.len());
        for chunk in frames.chunks_mut(BATCH) {
            self.decide_chunk(chunk, decisions);
        }
        self.count(in_port, frames, decisions);
    }

    fn decide_chunk<F: AsMut<[u8]>>(&self, chunk: &mut [F], decisions: &mut Vec<IpDecision>) {
        let base = decisions.len();
        let mut dests = [Dest::V4 { l3: 0, dst: 0 }; BATCH];
        let (mut a4, mut w4, mut n4) = ([0u32; BATCH], [0usize; BATCH], 0);
        let (mut a6, mut w6, mut n6) = ([0u128; BATCH], [0usize; BATCH], 0);
        for (i, (f, d)) in chunk.iter_mut().zip(dests.iter_mut()).enumerate() {
            match classify(f.as_mut(), self.cfg.max_frame_len) {
                Ok(dest) => {
                    match dest {
                        Dest::V4 { dst, .. } => {
                            a4[n4] = dst;
                            w4[n4] = i;
                            n4 += 1;
                        }
                        Dest::V6 { dst, .. } => {
                            a6[n6] = dst;
                            w6[n6] = i;
                            n6 += 1;
                        }
                    }
                    *d = dest;
                    decisions.push(IpDecision::NoRoute);
                }
                Err(v) => decisions.push(v),
            }
        }
        let mut o4 = [NO_ROUTE; BATCH];
        let mut o6 = [NO_ROUTE; BATCH];
        if n4 > 0 {
            self.v4.lookup_batch(&a4[..n4], &mut o4[..n4]);
        }
        if n6 > 0 {
            self.v6.lookup_batch(&a6[..n6], &mut o6[..n6]);
        }
        let hits = o4[..n4]
            .iter()
            .zip(&w4[..n4])
            .chain(o6[..n6].iter().zip(&w6[..n6]));
        for (&nh, &i) in hits {
            if nh == NO_ROUTE {
                continue;
            }
            let (Some(n), Some(f), Some(d)) = (
                self.neighbor(nh),
                chunk.get_mut(i),
                decisions.get_mut(base + i),
            ) else {
                continue;
            };
            rewrite(f.as_mut(), dests[i], n);
            *d = IpDecision::Forward(n.port);
        }
    }

    fn count<F: AsMut<[u8]>>(&mut self, in_port: u16, frames: &mut [F], decisions: &[IpDecision]) {
        let c = &mut self.counters;
        let mut rx_frames = 0u64;
        let mut rx_bytes = 0u64;
        for (f, d) in frames.iter_mut().zip(decisions) {
            let bytes = f.as_mut().len() as u64;
            rx_frames += 1;
            rx_bytes += bytes;
            match d {
                IpDecision::Forward(p) => {
                    c.hits.port += 1;
                    c.forwarded += 1;
                    c.tx_add(*p, bytes);
                }
                IpDecision::NoRoute => {
                    c.misses += 1;
                    c.dropped += 1;
                }
                IpDecision::TtlExpired => {
                    c.ttl_expired += 1;
                    c.dropped += 1;
                }
                IpDecision::Malformed(e) => {
                    c.malformed_add(e.kind());
                    c.dropped += 1;
                }
            }
        }
        c.frames_in += rx_frames;
        c.bytes_in += rx_bytes;
        let rx = c.rx_mut(in_port);
        rx.frames += rx_frames;
        rx.bytes += rx_bytes;
    }

    /// What the port layer does with a frame that got decision `d`.
    #[inline]
    pub fn egress<'a>(&self, d: &'a IpDecision) -> Egress<'a> {
        match d {
            IpDecision::Forward(p) => Egress::Ports(std::slice::from_ref(p)),
            _ => Egress::Discard,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &IpConfig {
        &self.cfg
    }

    /// Every output port of the neighbour table, sorted.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Take the counters, leaving zeroed ones.
    pub fn take_counters(&mut self) -> Counters {
        let fresh = Counters::with_tx_ports(self.ports.last().copied());
        std::mem::replace(&mut self.counters, fresh)
    }

    /// Continue from `counters` (taken from a previous pipeline).
    pub fn set_counters(&mut self, counters: Counters) {
        let mut c = Counters::with_tx_ports(self.ports.last().copied());
        c.merge(&counters);
        self.counters = c;
    }
}

#[cfg(test)]
mod tests;
