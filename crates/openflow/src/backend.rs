//! The controller side of the Open vSwitch backend, without I/O: OpenFlow
//! messages in, OpenFlow messages out. [`crate::conn`] runs it over a TCP
//! connection; tests run it over vectors.
//!
//! * On connect: hello, features request, set-config (whole packets to the
//!   controller, unbuffered), then a flush: delete every flow, add the
//!   table-miss flow (priority 0, to the controller), barrier. The
//!   backend's view of installed flows is emptied and the flows it held
//!   are counted ([`Counters::flushed_flows`]): after a restart of the
//!   switch or a dropped connection nothing stale stays installed, and
//!   flows come back as packets miss.
//! * A packet-in runs the app ([`nexthop_sdf::app::decide`]), exactly as
//!   the nexthop pipeline does on a cache miss. A cacheable decision
//!   becomes a flow-mod add ([`crate::flow::translate`]) with an idle
//!   timeout and the send-flow-removed flag; the packet-outs of the
//!   packet wait for a barrier sent after the flow-mod and go when its
//!   reply comes, so the flow is in place before the packet leaves.
//!   A decision OpenFlow cannot express is not installed: the packet is
//!   sent, the reason counted. A decision whose flow is already in the
//!   view with the same cookie (more packets of a flow that missed before
//!   its flow-mod took effect) sends no flow-mod; its packet-outs queue
//!   behind those still waiting for a barrier, so packets leave in order.
//! * Cookies: each state id a flow depends on gets a 32-bit tag (its own,
//!   while the id lives); a flow's cookie is `tag_a << 32 | tag_b` for a
//!   decision with two ids, `tag << 32 | tag` for one, 0 for none.
//!   Decisions with more than two ids are not installed. When the app
//!   calls `removed(id)` the backend sends two flow-mod deletes filtered
//!   by cookie, one per half (`cookie_mask` all ones over it), then a
//!   barrier: every flow that depended on the id goes, whichever half
//!   carries it, and no other. Freed tags are reused oldest first.
//! * Errors are counted; one about a flow-mod add drops that flow from the
//!   view. Flow-removed notices (idle or hard timeout) drop theirs.
//! * Ports the app adds ([`Control::add_port`], its tunnels) have no
//!   OpenFlow port until a [`PortMapper`] makes one (an OVS patch or
//!   tunnel port numbered as the app's port): after every app call the
//!   backend hands new ports to it and removed ones back. Without a
//!   mapper, or when it fails, the port stays unmapped: packet-outs skip
//!   it and decisions that output to it are not installed.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime};

use nexthop_sdf::app::{decide, App, AppCounters, Control, PortInfo, PortKind, Ports};
use nexthop_sdf::{Config, ConfigError, DecisionCache, PortId, StateId};

use crate::codec::{
    hello_elements, Action, Body, FlowMod, FlowRemoved, Match, Message, PacketIn, PacketOut,
    FLAG_SEND_FLOW_REM, NO_BUFFER, NO_BUFFER_LEN, PORT_CONTROLLER,
};
use crate::flow::{out_port, translate, Inexpressible};

/// Makes the OpenFlow port of a port the app added (a tunnel): the
/// backend calls it after the app call that added or removed the port.
pub trait PortMapper: std::fmt::Debug {
    /// Create the switch port for `port`, with OpenFlow number `port.id`;
    /// an error leaves the app's port unmapped (counted; the mapper
    /// reports it).
    fn add(&mut self, port: &PortInfo) -> Result<(), String>;
    /// The app deleted its port `id` (mapped before): remove the switch's.
    fn remove(&mut self, id: PortId) -> Result<(), String>;
}

/// Cookie mask of the high tag.
pub const HIGH_TAG: u64 = 0xffff_ffff_0000_0000;
/// Cookie mask of the low tag.
pub const LOW_TAG: u64 = 0x0000_0000_ffff_ffff;

/// The backend's settings.
#[derive(Clone, Debug)]
pub struct BackendConfig {
    /// The app's ports: OpenFlow port numbers of the bridge (1 ..= 65535).
    pub ports: Vec<PortId>,
    /// Seconds a flow may go unused before the switch removes it (0:
    /// never).
    pub idle_timeout: u16,
    /// The decision cache's settings (the backend uses its state table:
    /// `max_state_ids`).
    pub cache: Config,
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig {
            ports: Vec::new(),
            idle_timeout: 10,
            cache: Config::default(),
        }
    }
}

/// What the backend did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// OpenFlow sessions started.
    pub connections: u64,
    /// Sessions after the first (the switch restarted or the connection
    /// dropped).
    pub reconnects: u64,
    /// Flushes (one per session).
    pub flushes: u64,
    /// Flows in the view when it was flushed.
    pub flushed_flows: u64,
    /// Packet-ins.
    pub packet_ins: u64,
    /// Packet-ins refused (no or unknown ingress port, truncated data).
    pub bad_packet_ins: u64,
    /// Flow-mod adds sent.
    pub flows_installed: u64,
    /// Decisions whose flow was already installed (or on its way) with
    /// the same cookie: no flow-mod (a re-add would make OVS revalidate
    /// its datapath flows, sending more packets to the controller).
    pub flows_present: u64,
    /// Cacheable decisions not installed: bits OpenFlow cannot match.
    pub not_installed_bits: u64,
    /// ... a required frame length no field implies.
    pub not_installed_length: u64,
    /// ... rewrites or primitives OpenFlow cannot do, or ports it cannot
    /// name.
    pub not_installed_actions: u64,
    /// ... more than two state ids.
    pub not_installed_states: u64,
    /// ... no marks and no state, or a state id already removed.
    pub not_cached: u64,
    /// Packet-outs sent.
    pub packet_outs: u64,
    /// Frames the app sent to the control port (not sent anywhere).
    pub to_controller: u64,
    /// State ids removed that had a tag (each: two flow-mod deletes).
    pub revoked_states: u64,
    /// Flow-mod deletes sent (flushes included).
    pub deletes: u64,
    /// Flows of the view revoked with their state.
    pub revoked_flows: u64,
    /// Flow-removed notices that took a flow out of the view (timeouts).
    pub flows_expired: u64,
    /// Error messages received.
    pub errors: u64,
    /// Flows the switch refused (an error about their flow-mod).
    pub refused_flows: u64,
    /// Barriers sent.
    pub barriers: u64,
    /// Packet-outs dropped because the connection went before their
    /// barrier's reply.
    pub dropped_waiting: u64,
    /// Revocations confirmed by their barrier's reply.
    pub revocations_confirmed: u64,
    /// Sum of their latencies (app call return to barrier reply), µs.
    pub revocation_us_sum: u64,
    /// The largest of them, µs.
    pub revocation_us_max: u64,
    /// Other messages (port status, ...).
    pub other_messages: u64,
    /// Messages from the switch that did not decode (skipped; a stream
    /// that cannot be framed any more ends the session).
    pub decode_errors: u64,
    /// Messages not sent because they exceed OpenFlow's 64 KiB (a frame
    /// too large for a packet-out).
    pub encode_errors: u64,
    /// Ports the app added that got a switch port ([`PortMapper`]).
    pub mapped_ports: u64,
    /// Ports the app added that have none (no mapper, or it failed).
    pub unmapped_ports: u64,
    /// Outputs to unmapped ports left out of packet-outs.
    pub unmapped_outputs: u64,
}

impl Counters {
    /// All cacheable decisions that were not installed.
    pub fn not_installed(&self) -> u64 {
        self.not_installed_bits
            + self.not_installed_length
            + self.not_installed_actions
            + self.not_installed_states
    }
}

/// A revocation the switch confirmed, as [`Controller::take_revocations`]
/// gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revocation {
    /// When the backend found the app's `removed()` calls (the app call
    /// that made them had returned; the deletes went next), on the
    /// realtime clock, to compare with packet timestamps.
    pub removed_at: SystemTime,
    /// State ids revoked (each: two flow-mod deletes).
    pub states: u64,
    /// From `removed_at` to the barrier reply that confirms the deletes.
    pub confirmed_after: Duration,
}

impl Revocation {
    /// `revocation removed_unix_ns=N states=S confirmed_us=U`, the line
    /// `serve` prints (with the `nexthop sdf: ` prefix) when asked.
    pub fn line(&self) -> String {
        let ns = self
            .removed_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!(
            "revocation removed_unix_ns={ns} states={} confirmed_us={}",
            self.states,
            self.confirmed_after.as_micros()
        )
    }
}

/// Revocations sent, not yet confirmed: when and how many state ids.
#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Instant,
    wall: SystemTime,
    states: u64,
}

impl Sent {
    fn now() -> Sent {
        Sent {
            at: Instant::now(),
            wall: SystemTime::now(),
            states: 0,
        }
    }
}

/// Packet-outs waiting for a barrier reply.
#[derive(Debug)]
struct Waiting {
    barrier: u32,
    outs: Vec<Message>,
    /// The barrier confirms the revocation sent then.
    revocation: Option<Sent>,
}

/// A flow in the view: `(priority, match)`, as the switch identifies it.
type FlowKey = (u16, Match);

/// The OpenFlow side of an SDF switch: `app` decides, Open vSwitch
/// forwards (see the module docs).
#[derive(Debug)]
pub struct Controller<A> {
    app: A,
    /// Issues and revokes state ids; holds no entries.
    cache: DecisionCache,
    ports: Ports,
    app_counters: AppCounters,
    idle_timeout: u16,
    tags: HashMap<StateId, u32>,
    free_tags: VecDeque<u32>,
    next_tag: u32,
    /// Flows installed (as far as the switch has said): key -> cookie.
    view: HashMap<FlowKey, u64>,
    /// Flow-mod adds not yet confirmed by a barrier reply: xid -> flow.
    unconfirmed: BTreeMap<u32, FlowKey>,
    waiting: VecDeque<Waiting>,
    removed_seen: u64,
    next_xid: u32,
    connected: bool,
    datapath_id: Option<u64>,
    last_error: Option<(u16, u16)>,
    counters: Counters,
    mapper: Option<Box<dyn PortMapper + Send>>,
    /// Ports the app added, mapped to a switch port.
    mapped: BTreeSet<PortId>,
    /// Ports the app added that have no switch port.
    unmapped: BTreeSet<PortId>,
    /// Confirmed revocations, kept while logging is on.
    revocation_log: Option<Vec<Revocation>>,
}

impl<A: App> Controller<A> {
    /// A controller running `app` with `cfg`.
    pub fn new(app: A, cfg: &BackendConfig) -> Result<Controller<A>, ConfigError> {
        Ok(Controller {
            app,
            cache: DecisionCache::new(cfg.cache)?,
            ports: Ports::physical(&cfg.ports),
            app_counters: AppCounters::default(),
            idle_timeout: cfg.idle_timeout,
            tags: HashMap::new(),
            free_tags: VecDeque::new(),
            next_tag: 1,
            view: HashMap::new(),
            unconfirmed: BTreeMap::new(),
            waiting: VecDeque::new(),
            removed_seen: 0,
            next_xid: 1,
            connected: false,
            datapath_id: None,
            last_error: None,
            counters: Counters::default(),
            mapper: None,
            mapped: BTreeSet::new(),
            unmapped: BTreeSet::new(),
            revocation_log: None,
        })
    }

    /// Keep a record of every confirmed revocation (off by default) for
    /// [`Self::take_revocations`]; the caller takes them as it goes (the
    /// record grows until then).
    pub fn log_revocations(&mut self, on: bool) {
        self.revocation_log = on.then(Vec::new);
    }

    /// The revocations confirmed since the last call, oldest first (none
    /// unless [`Self::log_revocations`] is on).
    pub fn take_revocations(&mut self) -> Vec<Revocation> {
        self.revocation_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Make switch ports for the ports the app adds with `mapper` (module
    /// docs).
    pub fn set_port_mapper(&mut self, mapper: Box<dyn PortMapper + Send>) {
        self.mapper = Some(mapper);
    }

    /// The ports the app added that have a switch port.
    pub fn mapped_ports(&self) -> Vec<PortId> {
        self.mapped.iter().copied().collect()
    }

    /// Hand the ports the app added or removed since the last call to the
    /// mapper.
    fn map_ports(&mut self) {
        let added: Vec<PortInfo> = self
            .ports
            .ids()
            .into_iter()
            .filter_map(|id| self.ports.get(id))
            .filter(|p| {
                p.kind == PortKind::Tunnel
                    && !self.mapped.contains(&p.id)
                    && !self.unmapped.contains(&p.id)
            })
            .cloned()
            .collect();
        for p in added {
            let r = match self.mapper.as_mut() {
                Some(m) => m.add(&p),
                None => Err(format!("port {}: no switch port for it (no mapper)", p.id)),
            };
            match r {
                Ok(()) => {
                    self.mapped.insert(p.id);
                    self.counters.mapped_ports += 1;
                }
                Err(_) => {
                    self.unmapped.insert(p.id);
                    self.counters.unmapped_ports += 1;
                }
            }
        }
        let gone: Vec<PortId> = self
            .mapped
            .iter()
            .chain(&self.unmapped)
            .copied()
            .filter(|&id| !self.ports.contains(id))
            .collect();
        for id in gone {
            self.unmapped.remove(&id);
            if self.mapped.remove(&id) {
                if let Some(m) = self.mapper.as_mut() {
                    // A failure leaves a switch port nothing outputs to.
                    let _ = m.remove(id);
                }
            }
        }
    }

    /// The app.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The app, to change its state from outside (tests, drivers); call
    /// [`Self::sync`] after.
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    /// A [`Control`] for the caller (to call `removed`, say); call
    /// [`Self::sync`] after.
    pub fn control(&mut self, now: Duration) -> Control<'_> {
        Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            now,
            false,
        )
    }

    /// Run `f` on the app with a [`Control`] at `now` (a driver changing
    /// the app's state, a route table say), then send the revocations it
    /// caused ([`Self::sync`]).
    pub fn with_app<R>(
        &mut self,
        now: Duration,
        out: &mut Vec<Message>,
        f: impl FnOnce(&mut A, &mut Control<'_>) -> R,
    ) -> R {
        let mut ctl = Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            now,
            false,
        );
        let r = f(&mut self.app, &mut ctl);
        self.sync(out);
        r
    }

    /// The backend's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The app side's counters.
    pub fn app_counters(&self) -> &AppCounters {
        &self.app_counters
    }

    /// Flows installed, as far as the switch has said.
    pub fn flows(&self) -> usize {
        self.view.len()
    }

    /// The cookie of the flow `(priority, matches)`, if installed.
    pub fn cookie(&self, priority: u16, matches: &Match) -> Option<u64> {
        self.view.get(&(priority, matches.clone())).copied()
    }

    /// The tag of state id `id`, if a flow used it and it lives.
    pub fn tag(&self, id: StateId) -> Option<u32> {
        self.tags.get(&id).copied()
    }

    /// Packet-outs waiting for barrier replies.
    pub fn waiting(&self) -> usize {
        self.waiting.iter().map(|w| w.outs.len()).sum()
    }

    /// The switch's datapath id (after its features reply).
    pub fn datapath_id(&self) -> Option<u64> {
        self.datapath_id
    }

    /// The last error the switch reported: (type, code).
    pub fn last_error(&self) -> Option<(u16, u16)> {
        self.last_error
    }

    fn xid(&mut self) -> u32 {
        let x = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1).max(1);
        x
    }

    fn send(&mut self, out: &mut Vec<Message>, body: Body) -> u32 {
        let xid = self.xid();
        out.push(Message::new(xid, body));
        xid
    }

    /// A session started: greet the switch and flush it (module docs).
    pub fn connected(&mut self, out: &mut Vec<Message>) {
        self.connected = true;
        self.counters.connections += 1;
        if self.counters.connections > 1 {
            self.counters.reconnects += 1;
        }
        self.send(out, Body::Hello(hello_elements()));
        self.send(out, Body::FeaturesRequest);
        self.send(
            out,
            Body::SetConfig {
                flags: 0,
                miss_send_len: NO_BUFFER_LEN,
            },
        );
        self.counters.flushes += 1;
        self.counters.flushed_flows += self.view.len() as u64;
        self.view.clear();
        self.unconfirmed.clear();
        self.send(out, Body::FlowMod(FlowMod::delete_by_cookie(0, 0)));
        self.counters.deletes += 1;
        let miss = FlowMod::add(
            0,
            0,
            Match::default(),
            vec![Action::output(PORT_CONTROLLER)],
        );
        self.send(out, Body::FlowMod(miss));
        self.send(out, Body::BarrierRequest);
        self.counters.barriers += 1;
    }

    /// The session ended: packets waiting for a barrier are dropped
    /// (counted); the view stays until the next session flushes it.
    pub fn disconnected(&mut self) {
        self.connected = false;
        for w in self.waiting.drain(..) {
            self.counters.dropped_waiting += w.outs.len() as u64;
        }
    }

    /// Count a message from the switch that did not decode.
    pub fn note_decode_error(&mut self) {
        self.counters.decode_errors += 1;
    }

    /// Count a message too large to send.
    pub fn note_encode_error(&mut self) {
        self.counters.encode_errors += 1;
    }

    /// Whether a session is up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// Let the app expire state ([`App::on_tick`]) at `now`, then send
    /// the revocations it caused.
    pub fn tick(&mut self, now: Duration, out: &mut Vec<Message>) {
        let mut ctl = Control::owned(
            &mut self.cache,
            &mut self.ports,
            &mut self.app_counters,
            now,
            false,
        );
        self.app.on_tick(&mut ctl);
        self.sync(out);
    }

    /// Send the revocations of state ids removed since the last call
    /// (deletes by cookie, then a barrier whose reply confirms them).
    pub fn sync(&mut self, out: &mut Vec<Message>) {
        let found = Sent::now();
        self.map_ports();
        if let Some(sent) = self.revoke(out, found) {
            let b = self.send(out, Body::BarrierRequest);
            self.counters.barriers += 1;
            self.waiting.push_back(Waiting {
                barrier: b,
                outs: Vec::new(),
                revocation: Some(sent),
            });
        }
    }

    /// Deletes for the tags of removed ids, found at `found` (the app call
    /// had returned); `found` with the number of ids, if any went.
    fn revoke(&mut self, out: &mut Vec<Message>, found: Sent) -> Option<Sent> {
        let calls = self.cache.counters().removed_calls;
        if calls == self.removed_seen {
            return None;
        }
        self.removed_seen = calls;
        let dead: Vec<(StateId, u32)> = self
            .tags
            .iter()
            .filter(|(id, _)| !self.cache.is_live(**id))
            .map(|(id, t)| (*id, *t))
            .collect();
        let sent = Sent {
            states: dead.len() as u64,
            ..found
        };
        for &(id, tag) in &dead {
            self.tags.remove(&id);
            let t = u64::from(tag);
            self.send(
                out,
                Body::FlowMod(FlowMod::delete_by_cookie(t << 32, HIGH_TAG)),
            );
            self.send(out, Body::FlowMod(FlowMod::delete_by_cookie(t, LOW_TAG)));
            self.counters.deletes += 2;
            self.counters.revoked_states += 1;
            let before = self.view.len();
            self.view
                .retain(|_, c| (*c >> 32) as u32 != tag && *c as u32 != tag);
            self.counters.revoked_flows += (before - self.view.len()) as u64;
            self.free_tags.push_back(tag);
        }
        (!dead.is_empty() && self.connected).then_some(sent)
    }

    fn tag_for(&mut self, id: StateId) -> u32 {
        if let Some(&t) = self.tags.get(&id) {
            return t;
        }
        let t = self.free_tags.pop_front().unwrap_or_else(|| {
            let t = self.next_tag;
            self.next_tag = self.next_tag.wrapping_add(1).max(1);
            t
        });
        self.tags.insert(id, t);
        t
    }

    /// Handle one message from the switch at app time `now`.
    pub fn handle(&mut self, msg: Message, now: Duration, out: &mut Vec<Message>) {
        match msg.body {
            Body::EchoRequest(d) => out.push(Message::new(msg.xid, Body::EchoReply(d))),
            Body::FeaturesReply { datapath_id, .. } => self.datapath_id = Some(datapath_id),
            Body::Hello(_) | Body::EchoReply(_) => {}
            Body::Error { typ, code, .. } => {
                self.counters.errors += 1;
                self.last_error = Some((typ, code));
                if let Some(k) = self.unconfirmed.remove(&msg.xid) {
                    if self.view.remove(&k).is_some() {
                        self.counters.refused_flows += 1;
                    }
                }
            }
            Body::BarrierReply => self.barrier_reply(msg.xid, out),
            Body::FlowRemoved(f) => self.flow_removed(f),
            Body::PacketIn(p) => self.packet_in(p, now, out),
            _ => self.counters.other_messages += 1,
        }
    }

    fn barrier_reply(&mut self, xid: u32, out: &mut Vec<Message>) {
        // Barriers are answered in order: everything queued up to this one
        // is confirmed.
        if !self.waiting.iter().any(|w| w.barrier == xid) {
            self.unconfirmed.retain(|&x, _| x > xid);
            return;
        }
        while let Some(w) = self.waiting.pop_front() {
            self.counters.packet_outs += w.outs.len() as u64;
            out.extend(w.outs);
            if let Some(r) = w.revocation {
                let after = r.at.elapsed();
                let us = after.as_micros().min(u128::from(u64::MAX)) as u64;
                self.counters.revocations_confirmed += 1;
                self.counters.revocation_us_sum += us;
                self.counters.revocation_us_max = self.counters.revocation_us_max.max(us);
                if let Some(log) = self.revocation_log.as_mut() {
                    log.push(Revocation {
                        removed_at: r.wall,
                        states: r.states,
                        confirmed_after: after,
                    });
                }
            }
            if w.barrier == xid {
                break;
            }
        }
        self.unconfirmed.retain(|&x, _| x > xid);
    }

    fn flow_removed(&mut self, f: FlowRemoved) {
        // Reason 2 (deleted): the backend deleted it and already took it
        // out of the view; a flow added since under the same match stays.
        if f.reason == 2 {
            return;
        }
        let k = (f.priority, f.matches);
        if self.view.get(&k) == Some(&f.cookie) {
            self.view.remove(&k);
            self.counters.flows_expired += 1;
        }
    }

    fn packet_in(&mut self, p: PacketIn, now: Duration, out: &mut Vec<Message>) {
        self.counters.packet_ins += 1;
        let port = p.matches.in_port();
        let in_port = match port.and_then(|p| PortId::try_from(p).ok()) {
            Some(ip) if self.ports.contains(ip) => ip,
            _ => {
                self.counters.bad_packet_ins += 1;
                return;
            }
        };
        if p.buffer_id != NO_BUFFER && p.data.len() < usize::from(p.total_len) {
            self.counters.bad_packet_ins += 1;
            return;
        }
        let reply = {
            let mut ctl = Control::owned(
                &mut self.cache,
                &mut self.ports,
                &mut self.app_counters,
                now,
                false,
            );
            decide(&mut self.app, &mut ctl, p.data.clone(), in_port)
        };
        let found = Sent::now();
        self.map_ports();
        let revoked = self.revoke(out, found);
        let mut fenced = revoked.is_some();
        if let Some(d) = &reply.decision {
            fenced |= self.install(&p.data, u32::from(in_port), d, out);
        }
        let mut outs = Vec::with_capacity(reply.emits.len());
        for e in reply.emits {
            if e.controller {
                self.counters.to_controller += 1;
            }
            let unmapped = e.ports.iter().filter(|q| self.unmapped.contains(q)).count();
            self.counters.unmapped_outputs += unmapped as u64;
            if e.ports.len() == unmapped {
                continue;
            }
            let actions = e
                .ports
                .iter()
                .filter(|q| !self.unmapped.contains(q))
                .map(|&q| Action::output(out_port(u32::from(q), u32::from(in_port))))
                .collect();
            outs.push(Message::new(
                self.xid(),
                Body::PacketOut(PacketOut {
                    buffer_id: NO_BUFFER,
                    in_port: u32::from(in_port),
                    actions,
                    data: e.bytes,
                }),
            ));
        }
        if fenced && self.connected {
            let b = self.send(out, Body::BarrierRequest);
            self.counters.barriers += 1;
            self.waiting.push_back(Waiting {
                barrier: b,
                outs,
                revocation: revoked,
            });
        } else if let Some(last) = self.waiting.back_mut().filter(|_| self.connected) {
            // Behind packets still waiting for a barrier: in order.
            last.outs.extend(outs);
        } else {
            self.counters.packet_outs += outs.len() as u64;
            out.extend(outs);
        }
    }

    /// Send the flow-mod for a decision; whether one was sent.
    fn install(
        &mut self,
        frame: &[u8],
        in_port: u32,
        d: &nexthop_sdf::Decision,
        out: &mut Vec<Message>,
    ) -> bool {
        if (d.mask.is_empty() && d.states.is_empty())
            || d.states.iter().any(|&s| !self.cache.is_live(s))
        {
            self.counters.not_cached += 1;
            return false;
        }
        if d.actions.ports().iter().any(|q| self.unmapped.contains(q)) {
            self.counters.not_installed_actions += 1;
            return false;
        }
        let spec = match translate(frame, in_port, d) {
            Ok(s) => s,
            Err(e) => {
                match e {
                    Inexpressible::Bits(_) => self.counters.not_installed_bits += 1,
                    Inexpressible::Length(_) => self.counters.not_installed_length += 1,
                    Inexpressible::States(_) => self.counters.not_installed_states += 1,
                    _ => self.counters.not_installed_actions += 1,
                }
                return false;
            }
        };
        let cookie = match d.states.as_slice() {
            [] => 0,
            [a] => {
                let t = u64::from(self.tag_for(*a));
                t << 32 | t
            }
            [a, b, ..] => u64::from(self.tag_for(*a)) << 32 | u64::from(self.tag_for(*b)),
        };
        let key = (spec.priority, spec.matches);
        if self.view.get(&key) == Some(&cookie) {
            // The same decision (a live tag means the same state ids, and
            // the app is deterministic): the packets of a flow that missed
            // before its flow-mod took effect.
            self.counters.flows_present += 1;
            return false;
        }
        let mut fm = FlowMod::add(key.0, cookie, key.1.clone(), spec.actions);
        fm.idle_timeout = self.idle_timeout;
        fm.flags = FLAG_SEND_FLOW_REM;
        let xid = self.send(out, Body::FlowMod(fm));
        self.view.insert(key.clone(), cookie);
        self.unconfirmed.insert(xid, key);
        self.counters.flows_installed += 1;
        true
    }
}

/// The counters of a run, named as in the summary line
/// (`nexthop sdf run --backend ovs`, `python -m nexthop.sdf run --backend ovs`).
pub fn summary_fields(c: &Counters, a: &AppCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("connections", c.connections),
        ("reconnects", c.reconnects),
        ("flushed_flows", c.flushed_flows),
        ("packet_ins", c.packet_ins),
        ("bad_packet_ins", c.bad_packet_ins),
        ("app_calls", a.app_calls),
        ("app_drops", a.drops.total()),
        ("flows_installed", c.flows_installed),
        ("flows_present", c.flows_present),
        ("not_installed", c.not_installed()),
        ("not_installed_bits", c.not_installed_bits),
        ("not_installed_length", c.not_installed_length),
        ("not_installed_actions", c.not_installed_actions),
        ("not_installed_states", c.not_installed_states),
        ("not_cached", c.not_cached),
        ("packet_outs", c.packet_outs),
        ("revoked_states", c.revoked_states),
        ("revoked_flows", c.revoked_flows),
        ("deletes", c.deletes),
        ("flows_expired", c.flows_expired),
        ("errors", c.errors),
        ("refused_flows", c.refused_flows),
        ("barriers", c.barriers),
        ("dropped_waiting", c.dropped_waiting),
        ("revocations_confirmed", c.revocations_confirmed),
        (
            "revocation_us_mean",
            c.revocation_us_sum
                .checked_div(c.revocations_confirmed)
                .unwrap_or(0),
        ),
        ("revocation_us_max", c.revocation_us_max),
        ("decode_errors", c.decode_errors),
        ("mapped_ports", c.mapped_ports),
        ("unmapped_ports", c.unmapped_ports),
        ("unmapped_outputs", c.unmapped_outputs),
    ]
}

/// `nexthop sdf: app=APP backend=ovs NAME=VALUE ...`.
pub fn summary_line(app: &str, fields: &[(&str, u64)]) -> String {
    let mut s = format!("nexthop sdf: app={app} backend=ovs");
    for (k, v) in fields {
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

#[cfg(test)]
mod tests;
