//! A built-in app: an Ethernet learning switch (paper §5.1's first
//! example) written against the API.
//!
//! Every MAC address the switch knows about has one binding: the port it
//! was learned on, or "unknown" (frames to it are flooded), and a state
//! id. A decision marks the destination and source MACs and the ingress
//! port, and registers the bindings it used: the destination's (which
//! port, or flood) and the source's (the source is known on this port, so
//! the packet teaches nothing). So:
//!
//! * learning a MAC removes its "unknown" id: exactly the floods to it go;
//! * a MAC move removes its old binding's id: exactly the decisions to it
//!   and from it on the old port go;
//! * a binding older than the timeout (learned or unknown) is removed the
//!   same way by [`App::on_tick`].
//!
//! Bindings are capped (`max_macs`); past the cap the switch still
//! forwards (floods to unknown destinations) but does not cache what it
//! could not record. Frames shorter than an Ethernet header are dropped
//! uncached.

use std::collections::HashMap;
use std::time::Duration;

use smallvec::SmallVec;

use super::{App, AppError, Control, InPkt};
use crate::cache::StateId;
use crate::key::PortId;
use crate::seeded::SeededHash;

/// An [`L2Switch`]'s settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Config {
    /// A binding this old is forgotten (its decisions revoked).
    pub timeout: Duration,
    /// Bindings held at most.
    pub max_macs: usize,
}

impl Default for L2Config {
    fn default() -> Self {
        L2Config {
            timeout: Duration::from_secs(300),
            max_macs: 1 << 16,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Binding {
    /// `None`: not learned yet (frames to it are flooded).
    port: Option<PortId>,
    id: StateId,
    since: Duration,
}

/// The learning switch.
#[derive(Debug, Default)]
pub struct L2Switch {
    cfg: L2Config,
    macs: HashMap<[u8; 6], Binding, SeededHash>,
    learned: u64,
    moves: u64,
    expired: u64,
}

impl L2Switch {
    /// A switch with `cfg`.
    pub fn new(cfg: L2Config) -> L2Switch {
        L2Switch {
            cfg,
            ..L2Switch::default()
        }
    }

    /// The port `mac` was learned on.
    pub fn port_of(&self, mac: [u8; 6]) -> Option<PortId> {
        self.macs.get(&mac).and_then(|b| b.port)
    }

    /// Bindings held (learned and unknown).
    pub fn bindings(&self) -> usize {
        self.macs.len()
    }

    /// MACs learned (first time or again after expiry).
    pub fn learned(&self) -> u64 {
        self.learned
    }

    /// MACs that moved to another port.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Bindings forgotten by the timeout.
    pub fn expired(&self) -> u64 {
        self.expired
    }

    /// A new binding for `mac`, replacing (and revoking) any old one;
    /// `None` at the cap or out of state ids.
    fn bind(
        &mut self,
        ctl: &mut Control<'_>,
        mac: [u8; 6],
        port: Option<PortId>,
    ) -> Option<StateId> {
        if let Some(old) = self.macs.remove(&mac) {
            ctl.removed(old.id);
        } else if self.macs.len() >= self.cfg.max_macs {
            return None;
        }
        let id = ctl.new_state_id().ok()?;
        self.macs.insert(
            mac,
            Binding {
                port,
                id,
                since: ctl.now(),
            },
        );
        Some(id)
    }
}

/// A decision's output ports: inline for a learned destination (one
/// port) and for a flood over a few ports.
type Dests = SmallVec<[PortId; 4]>;

fn is_group(mac: &[u8; 6]) -> bool {
    mac[0] & 1 != 0
}

impl App for L2Switch {
    fn name(&self) -> &str {
        "l2switch"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        if pkt.len() < 14 {
            // Not Ethernet: dropped, and not cached (a decision that
            // depends on a frame being short cannot be marked).
            return Ok(());
        }
        let mut dst = [0u8; 6];
        dst.copy_from_slice(pkt.bytes(0, 6)?);
        let mut src = [0u8; 6];
        src.copy_from_slice(pkt.bytes(6, 6)?);
        let in_port = pkt.mark_ingress();
        // Inline (no allocation per decision): at most the two bindings.
        let mut states: SmallVec<[StateId; 2]> = SmallVec::new();
        let mut cacheable = true;

        // Learn the source.
        if !is_group(&src) {
            match self.macs.get(&src) {
                Some(b) if b.port == Some(in_port) => states.push(b.id),
                existing => {
                    let moved = existing.is_some_and(|b| b.port.is_some());
                    match self.bind(ctl, src, Some(in_port)) {
                        Some(id) => {
                            states.push(id);
                            self.learned += u64::from(!moved);
                            self.moves += u64::from(moved);
                        }
                        None => cacheable = false,
                    }
                }
            }
        }

        // Forward to the destination.
        let flood = |ctl: &Control<'_>| -> Dests {
            ctl.get_ports()
                .into_iter()
                .filter(|&p| p != in_port)
                .collect()
        };
        let dests: Dests = if is_group(&dst) {
            flood(ctl)
        } else {
            match self.macs.get(&dst).copied() {
                Some(b) => {
                    states.push(b.id);
                    match b.port {
                        // Same segment: the frame already reached it.
                        Some(p) if p == in_port => Dests::new(),
                        Some(p) => smallvec::smallvec![p],
                        None => flood(ctl),
                    }
                }
                None => {
                    match self.bind(ctl, dst, None) {
                        Some(id) => states.push(id),
                        None => cacheable = false,
                    }
                    flood(ctl)
                }
            }
        };

        let mut out = pkt.new_out_pkt();
        for p in dests {
            out.add_destination(p);
        }
        if cacheable {
            for id in states {
                out.register(id);
            }
        } else {
            pkt.clear();
        }
        pkt.send(out, true)?;
        Ok(())
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        let now = ctl.now();
        let timeout = self.cfg.timeout;
        let old: Vec<[u8; 6]> = self
            .macs
            .iter()
            .filter(|(_, b)| now.saturating_sub(b.since) >= timeout)
            .map(|(m, _)| *m)
            .collect();
        for mac in old {
            if let Some(b) = self.macs.remove(&mac) {
                ctl.removed(b.id);
                self.expired += 1;
            }
        }
    }
}
