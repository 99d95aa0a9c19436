//! The forwarder core, no I/O: NDNLPv2 reassembly, management commands,
//! routes, and the forwarding pipeline.

use std::collections::BTreeMap;

use nexthop_ndn::control::FibControl;
use nexthop_ndn::cs::CsConfig;
use nexthop_ndn::fib::Config as FibConfig;
use nexthop_ndn::fw::{Actions, Forwarder, FwConfig, FwCounters};
use nexthop_ndn::nexthop::NextHop;
use nexthop_ndn::pit::{FaceId, Millis};
use nexthop_wire::ndn::{tt, Interest, LpPacket, Name};

use crate::config::{NdndConfig, MAX_PACKET};
use crate::mgmt::{self, ControlParameters};
use crate::reasm::{ReasmCounters, Reassembler};

/// Counters of the core (the pipeline's own are in [`Core::fw_counters`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CoreCounters {
    /// Packets received from faces.
    pub packets_in: u64,
    /// Packets over [`MAX_PACKET`], dropped.
    pub oversized: u64,
    /// LpPackets that do not decode, dropped.
    pub bad_lp: u64,
    /// Management commands answered (any status).
    pub commands: u64,
    /// Management commands refused (status other than 200).
    pub commands_refused: u64,
}

/// Routes registered per prefix: `(face, cost)` pairs.
type Rib = BTreeMap<Vec<u8>, (Name, Vec<NextHop>)>;

/// One forwarding thread's state. See the module docs.
#[derive(Debug)]
pub struct Core {
    fw: Forwarder,
    fib: FibControl,
    rib: Rib,
    reasm: Reassembler,
    actions: Actions,
    counters: CoreCounters,
}

impl Core {
    /// A core with an empty FIB.
    pub fn new(cfg: &NdndConfig) -> Result<Core, String> {
        let fw_cfg = FwConfig {
            cs: (cfg.cs_packets > 0).then(|| CsConfig {
                capacity_packets: cfg.cs_packets,
                capacity_bytes: cfg.cs_packets.saturating_mul(MAX_PACKET).min(1 << 32),
                ..CsConfig::default()
            }),
            max_faces: cfg.max_faces,
            ..FwConfig::default()
        };
        let fw = Forwarder::new(fw_cfg).map_err(|e| format!("forwarder config: {e}"))?;
        let fib = FibControl::new(FibConfig {
            max_components: 32,
            ..FibConfig::default()
        })
        .map_err(|e| format!("fib config: {e}"))?;
        Ok(Core {
            fw,
            fib,
            rib: Rib::new(),
            reasm: Reassembler::new(cfg.reasm_max_partial, cfg.reasm_timeout_ms),
            actions: Actions::new(),
            counters: CoreCounters::default(),
        })
    }

    /// Take one packet received on `face` (`local`: a Unix face, or a
    /// TCP/UDP face whose peer is a loopback address). Appends what to
    /// send as `(face, bytes)` to `send`.
    pub fn receive(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        self.counters.packets_in += 1;
        if wire.len() > MAX_PACKET {
            self.counters.oversized += 1;
            return;
        }
        let mut lp_owned = None;
        let mut reassembled = None;
        if wire.first() == Some(&(tt::LP_PACKET as u8)) {
            let lp = match LpPacket::decode(wire) {
                Ok(lp) => lp,
                Err(_) => {
                    self.counters.bad_lp += 1;
                    return;
                }
            };
            if lp.frag_count.unwrap_or(1) > 1 {
                match self.reasm.push(face, lp, now) {
                    Some(whole) => {
                        reassembled = Some(whole.to_wire());
                        lp_owned = Some(whole);
                    }
                    None => return,
                }
            } else {
                lp_owned = Some(lp);
            }
        }
        if self.try_command(face, local, wire, lp_owned.as_ref(), send) {
            return;
        }
        let input: &[u8] = reassembled.as_deref().unwrap_or(wire);
        self.actions.clear();
        let fib = self.fib.fib();
        self.fw.process(fib, face, input, now, &mut self.actions);
        for a in self.actions.sends() {
            send.push((a.face, self.actions.to_wire(a)));
        }
    }

    /// Answer a management command; `false` when `wire` is not one.
    fn try_command(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        lp: Option<&LpPacket>,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) -> bool {
        let (frag, token, nack) = match lp {
            Some(lp) => match &lp.fragment {
                Some(f) => (f.as_slice(), lp.pit_token.clone(), lp.nack.is_some()),
                None => return false,
            },
            None => (wire, None, false),
        };
        if nack || frag.first() != Some(&(tt::INTEREST as u8)) {
            return false;
        }
        let Ok(interest) = Interest::decode(frag) else {
            return false;
        };
        if !mgmt::is_management(&interest.name) {
            return false;
        }
        self.counters.commands += 1;
        let (code, text, body) = self.command(face, local, &interest);
        if code != 200 {
            self.counters.commands_refused += 1;
        }
        let data = mgmt::response(&interest, code, &text, body.as_ref());
        let out = match token {
            Some(t) => LpPacket {
                pit_token: Some(t),
                ..LpPacket::wrap(data)
            }
            .to_wire(),
            None => data,
        };
        send.push((face, out));
        true
    }

    fn command(
        &mut self,
        face: FaceId,
        local: bool,
        interest: &Interest,
    ) -> (u64, String, Option<ControlParameters>) {
        let n = &interest.name;
        let comp = |k: usize| n.get(k).map(|c| c.value());
        if comp(0) == Some(b"localhost".as_slice()) && !local {
            return (403, "/localhost command from a non-local face".into(), None);
        }
        if comp(2) != Some(b"rib".as_slice())
            || !matches!(comp(3), Some(b"register") | Some(b"unregister"))
        {
            return (501, "unsupported command".into(), None);
        }
        let cmd = match mgmt::parse_command(interest) {
            Ok(c) => c,
            Err((code, text)) => return (code, text, None),
        };
        let Some(name) = cmd.params.name.clone() else {
            return (400, "ControlParameters without a Name".into(), None);
        };
        let target = match cmd.params.face_id {
            None | Some(0) => face,
            Some(f) => match FaceId::try_from(f) {
                Ok(f) if f < self.fw.config().max_faces => f,
                _ => return (410, "no such face".into(), None),
            },
        };
        let cost = cmd.params.cost.unwrap_or(0);
        let mut body = ControlParameters {
            name: Some(name.clone()),
            face_id: Some(u64::from(target)),
            origin: Some(cmd.params.origin.unwrap_or(0)),
            cost: Some(cost),
            flags: Some(cmd.params.flags.unwrap_or(1)),
            expiration_ms: cmd.params.expiration_ms,
        };
        let r = match cmd.verb.as_slice() {
            b"register" => {
                let Ok(cost) = u32::try_from(cost) else {
                    return (400, "cost out of range".into(), None);
                };
                self.add_route(&name, target, cost)
            }
            b"unregister" => {
                body.cost = None;
                body.flags = None;
                self.remove_route(&name, target)
            }
            _ => return (501, "unsupported command".into(), None),
        };
        match r {
            Ok(()) => (200, "OK".into(), Some(body)),
            Err(e) => (400, e, None),
        }
    }

    /// Route `prefix` to `face` with `cost` (replacing its cost).
    pub fn add_route(&mut self, prefix: &Name, face: FaceId, cost: u32) -> Result<(), String> {
        let key = prefix.value().to_vec();
        let mut hops = self.rib.get(&key).map(|e| e.1.clone()).unwrap_or_default();
        hops.retain(|h| h.face != face);
        hops.push(NextHop { face, cost });
        self.fib.insert(prefix, &hops).map_err(|e| e.to_string())?;
        self.rib.insert(key, (prefix.clone(), hops));
        Ok(())
    }

    /// Remove `face` from the routes of `prefix` (no route: not an error).
    pub fn remove_route(&mut self, prefix: &Name, face: FaceId) -> Result<(), String> {
        let key = prefix.value().to_vec();
        let Some((_, hops)) = self.rib.get_mut(&key) else {
            return Ok(());
        };
        hops.retain(|h| h.face != face);
        if hops.is_empty() {
            self.rib.remove(&key);
            self.fib.remove(prefix).map_err(|e| e.to_string())
        } else {
            let hops = hops.clone();
            self.fib.insert(prefix, &hops).map_err(|e| e.to_string())
        }
    }

    /// A face closed: its routes and partial packets go.
    pub fn face_closed(&mut self, face: FaceId) {
        self.reasm.face_closed(face);
        let prefixes: Vec<Name> = self
            .rib
            .values()
            .filter(|(_, h)| h.iter().any(|h| h.face == face))
            .map(|(n, _)| n.clone())
            .collect();
        for p in prefixes {
            // A removal of a prefix the FIB holds cannot fail for lack of it;
            // any other error leaves the FIB as it was.
            let _ = self.remove_route(&p, face);
        }
    }

    /// Periodic work: expire partial packets.
    pub fn tick(&mut self, now: Millis) {
        self.reasm.expire(now);
    }

    /// The routes: `(prefix, next hops)` in name order.
    pub fn routes(&self) -> impl Iterator<Item = (&Name, &[NextHop])> {
        self.rib.values().map(|(n, h)| (n, h.as_slice()))
    }

    /// The core's counters.
    pub fn counters(&self) -> &CoreCounters {
        &self.counters
    }

    /// The pipeline's counters.
    pub fn fw_counters(&self) -> &FwCounters {
        self.fw.counters()
    }

    /// The reassembly counters.
    pub fn reasm_counters(&self) -> &ReasmCounters {
        &self.reasm.counters
    }

    /// PIT entries.
    pub fn pit_len(&self) -> usize {
        self.fw.pit_len()
    }
}
