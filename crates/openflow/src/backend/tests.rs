use super::*;
use crate::codec::{field, FlowCommand, Instruction, Oxm, PacketIn, PORT_ANY, PORT_IN_PORT};
use nexthop_sdf::app::{parse_routes, L2Config, L2Switch, Router};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

fn frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn packet_in(port: u32, data: Vec<u8>) -> Message {
    Message::new(
        0,
        Body::PacketIn(PacketIn {
            buffer_id: NO_BUFFER,
            total_len: data.len() as u16,
            reason: 0,
            table_id: 0,
            cookie: 0,
            matches: Match {
                fields: vec![Oxm::exact(field::IN_PORT, &port.to_be_bytes())],
            },
            data,
        }),
    )
}

/// A controller running `app` on `ports` (idle timeout 7 s), its session
/// started (hello, flush: their messages dropped).
fn connected<A: App>(app: A, ports: &[PortId]) -> Controller<A> {
    let cfg = BackendConfig {
        ports: ports.to_vec(),
        idle_timeout: 7,
        ..BackendConfig::default()
    };
    let mut c = Controller::new(app, &cfg).unwrap();
    c.connected(&mut Vec::new());
    c
}

fn switch(timeout: u64) -> Controller<L2Switch> {
    let app = L2Switch::new(L2Config {
        timeout: Duration::from_secs(timeout),
        max_macs: 16,
    });
    connected(app, &[1, 2, 3])
}

fn flow_mods(out: &[Message]) -> Vec<&FlowMod> {
    out.iter()
        .filter_map(|m| match &m.body {
            Body::FlowMod(f) => Some(f),
            _ => None,
        })
        .collect()
}

fn barrier(out: &[Message]) -> u32 {
    out.iter()
        .find(|m| m.body == Body::BarrierRequest)
        .expect("a barrier")
        .xid
}

/// The switch's reply to the first barrier of `out`.
fn confirm<A: App>(c: &mut Controller<A>, out: &[Message]) {
    c.handle(
        Message::new(barrier(out), Body::BarrierReply),
        Duration::ZERO,
        &mut Vec::new(),
    );
}

fn packet_outs(out: &[Message]) -> Vec<&PacketOut> {
    out.iter()
        .filter_map(|m| match &m.body {
            Body::PacketOut(p) => Some(p),
            _ => None,
        })
        .collect()
}

#[test]
fn a_session_starts_with_hello_config_and_a_flush() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.connected(&mut out);
    let kinds: Vec<_> = out
        .iter()
        .map(|m| std::mem::discriminant(&m.body))
        .collect();
    assert_eq!(kinds.len(), 6);
    assert!(matches!(out[0].body, Body::Hello(_)));
    assert_eq!(out[1].body, Body::FeaturesRequest);
    assert_eq!(
        out[2].body,
        Body::SetConfig {
            flags: 0,
            miss_send_len: NO_BUFFER_LEN
        }
    );
    let fm = flow_mods(&out);
    assert_eq!(fm[0].command, FlowCommand::Delete);
    assert_eq!((fm[0].cookie_mask, fm[0].out_port), (0, PORT_ANY));
    assert_eq!((fm[1].priority, fm[1].matches.fields.len()), (0, 0));
    assert_eq!(
        fm[1].instructions,
        vec![Instruction::ApplyActions(vec![Action::output(
            PORT_CONTROLLER
        )])]
    );
    assert_eq!(out[5].body, Body::BarrierRequest);
    assert_eq!(c.counters().reconnects, 1);
}

#[test]
fn a_miss_installs_the_decision_and_releases_the_packet_after_the_barrier() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    let fm = flow_mods(&out);
    assert_eq!(fm.len(), 1);
    let f = fm[0];
    assert_eq!(f.command, FlowCommand::Add);
    assert_eq!((f.idle_timeout, f.flags), (7, FLAG_SEND_FLOW_REM));
    assert_eq!(
        f.matches.fields,
        vec![
            Oxm::exact(field::IN_PORT, &1u32.to_be_bytes()),
            Oxm::exact(field::ETH_DST, &B),
            Oxm::exact(field::ETH_SRC, &A),
        ]
    );
    // Two state ids: A's binding (port 1) and B's "unknown" binding.
    assert_ne!(f.cookie >> 32, f.cookie & LOW_TAG);
    assert_eq!(
        f.instructions,
        vec![Instruction::ApplyActions(vec![
            Action::output(2),
            Action::output(3)
        ])]
    );
    // The flood waits for the barrier.
    assert!(packet_outs(&out).is_empty());
    assert_eq!(c.waiting(), 1);
    let b = barrier(&out);
    let mut out2 = Vec::new();
    c.handle(
        Message::new(b, Body::BarrierReply),
        Duration::ZERO,
        &mut out2,
    );
    let po = packet_outs(&out2);
    assert_eq!(po.len(), 1);
    assert_eq!(po[0].in_port, 1);
    assert_eq!(po[0].actions, vec![Action::output(2), Action::output(3)]);
    assert_eq!(po[0].data, frame(B, A));
    assert_eq!(c.flows(), 1);
}

#[test]
fn learning_a_mac_revokes_exactly_the_flows_that_flooded_to_it() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    let flood = flow_mods(&out)[0].clone();
    let b_unknown_tag = flood.cookie & LOW_TAG;
    out.clear();
    // B answers from port 2: B's "unknown" binding is removed.
    c.handle(packet_in(2, frame(A, B)), Duration::ZERO, &mut out);
    let fm = flow_mods(&out);
    let deletes: Vec<_> = fm
        .iter()
        .filter(|f| f.command == FlowCommand::Delete)
        .collect();
    assert_eq!(deletes.len(), 2);
    assert_eq!(
        (deletes[0].cookie, deletes[0].cookie_mask),
        (b_unknown_tag << 32, HIGH_TAG)
    );
    assert_eq!(
        (deletes[1].cookie, deletes[1].cookie_mask),
        (b_unknown_tag, LOW_TAG)
    );
    // The new flow B -> A goes to port 1 only, after the deletes.
    let add = fm.iter().find(|f| f.command == FlowCommand::Add).unwrap();
    assert_eq!(
        add.instructions,
        vec![Instruction::ApplyActions(vec![Action::output(1)])]
    );
    assert_eq!(c.counters().revoked_states, 1);
    assert_eq!(c.counters().revoked_flows, 1);
    assert_eq!(c.flows(), 1);
    assert_eq!(c.cookie(flood.priority, &flood.matches), None);
    // The barrier after the deletes confirms the revocation.
    let b = barrier(&out);
    c.handle(
        Message::new(b, Body::BarrierReply),
        Duration::ZERO,
        &mut Vec::new(),
    );
    assert_eq!(c.counters().revocations_confirmed, 1);
}

#[test]
fn a_mac_timeout_revokes_through_tick_and_the_barrier_confirms_it() {
    let mut c = switch(5);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    confirm(&mut c, &out);
    out.clear();
    c.tick(Duration::from_secs(1), &mut out);
    assert!(out.is_empty());
    c.tick(Duration::from_secs(6), &mut out);
    // A's and B's bindings both expired: four deletes, one barrier.
    assert_eq!(flow_mods(&out).len(), 4);
    assert_eq!(c.flows(), 0);
    confirm(&mut c, &out);
    assert_eq!(c.counters().revocations_confirmed, 1);
}

#[test]
fn confirmed_revocations_are_logged_with_their_realtime_instant_when_asked() {
    // Off by default: nothing kept.
    let mut c = switch(5);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    c.tick(Duration::from_secs(6), &mut out);
    confirm(&mut c, &out[out.len() - 1..]);
    assert_eq!(c.counters().revocations_confirmed, 1);
    assert!(c.take_revocations().is_empty());

    let mut c = switch(5);
    c.log_revocations(true);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    confirm(&mut c, &out);
    out.clear();
    let before = SystemTime::now();
    c.tick(Duration::from_secs(6), &mut out);
    let after = SystemTime::now();
    // Sent, not yet confirmed: not in the log.
    assert!(c.take_revocations().is_empty());
    confirm(&mut c, &out);
    let log = c.take_revocations();
    assert_eq!(log.len(), 1, "{log:?}");
    let r = log[0];
    // A's and B's bindings, found between the tick's call and return.
    assert_eq!(r.states, 2);
    assert!(before <= r.removed_at && r.removed_at <= after, "{r:?}");
    assert!(u128::from(c.counters().revocation_us_max) >= r.confirmed_after.as_micros());
    let ns = r
        .removed_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    assert_eq!(
        r.line(),
        format!(
            "revocation removed_unix_ns={ns} states=2 confirmed_us={}",
            r.confirmed_after.as_micros()
        )
    );
    // Taken: gone.
    assert!(c.take_revocations().is_empty());
}

#[test]
fn flow_removed_and_errors_keep_the_view_consistent() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    let f = flow_mods(&out)[0].clone();
    let xid = out
        .iter()
        .find(|m| matches!(&m.body, Body::FlowMod(_)))
        .unwrap()
        .xid;
    let removed = |reason| {
        Message::new(
            0,
            Body::FlowRemoved(FlowRemoved {
                cookie: f.cookie,
                priority: f.priority,
                reason,
                table_id: 0,
                duration_sec: 7,
                duration_nsec: 0,
                idle_timeout: 7,
                hard_timeout: 0,
                packet_count: 0,
                byte_count: 0,
                matches: f.matches.clone(),
            }),
        )
    };
    // A delete notice is the backend's own doing: ignored.
    c.handle(removed(2), Duration::ZERO, &mut Vec::new());
    assert_eq!(c.flows(), 1);
    c.handle(removed(0), Duration::ZERO, &mut Vec::new());
    assert_eq!((c.flows(), c.counters().flows_expired), (0, 1));

    // The same decision again, refused by the switch.
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    let xid2 = out
        .iter()
        .find(|m| matches!(&m.body, Body::FlowMod(_)))
        .unwrap()
        .xid;
    assert_ne!(xid, xid2);
    assert_eq!(c.flows(), 1);
    let err = Body::Error {
        typ: 5,
        code: 0,
        data: vec![],
    };
    c.handle(Message::new(xid2, err), Duration::ZERO, &mut Vec::new());
    assert_eq!(c.flows(), 0);
    assert_eq!(c.counters().refused_flows, 1);
    assert_eq!(c.last_error(), Some((5, 0)));
}

#[test]
fn a_reconnect_flushes_and_counts_the_flows_and_drops_waiting_packets() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    c.disconnected();
    assert_eq!(c.counters().dropped_waiting, 1);
    let mut out = Vec::new();
    c.connected(&mut out);
    assert_eq!(c.counters().reconnects, 1);
    assert_eq!(c.counters().flushed_flows, 1);
    assert_eq!(c.flows(), 0);
    // The learned state survives: the next packet is decided the same.
    let mut out = Vec::new();
    c.handle(packet_in(2, frame(A, B)), Duration::ZERO, &mut out);
    let add = flow_mods(&out)
        .into_iter()
        .find(|f| f.command == FlowCommand::Add)
        .unwrap()
        .clone();
    assert_eq!(
        add.instructions,
        vec![Instruction::ApplyActions(vec![Action::output(1)])]
    );
}

#[test]
fn echo_is_answered_and_bad_packet_ins_are_refused() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(
        Message::new(9, Body::EchoRequest(vec![1, 2])),
        Duration::ZERO,
        &mut out,
    );
    assert_eq!(out, vec![Message::new(9, Body::EchoReply(vec![1, 2]))]);
    out.clear();
    c.handle(packet_in(9, frame(B, A)), Duration::ZERO, &mut out);
    let mut no_port = packet_in(1, frame(B, A));
    if let Body::PacketIn(p) = &mut no_port.body {
        p.matches.fields.clear();
    }
    c.handle(no_port, Duration::ZERO, &mut out);
    assert!(out.is_empty());
    assert_eq!(c.counters().bad_packet_ins, 2);
    // A runt frame: the app drops it, nothing is installed or sent.
    c.handle(packet_in(1, vec![1, 2, 3]), Duration::ZERO, &mut out);
    assert!(out.is_empty());
    assert_eq!(c.counters().bad_packet_ins, 2);
}

#[test]
fn broadcast_decisions_share_no_tag_with_unicast_ones() {
    let mut c = switch(300);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame([0xff; 6], A)), Duration::ZERO, &mut out);
    let f = flow_mods(&out)[0].clone();
    // One state id (A's binding): the tag is in both halves.
    assert_eq!(f.cookie >> 32, f.cookie & LOW_TAG);
    assert_eq!(
        f.instructions,
        vec![Instruction::ApplyActions(vec![
            Action::output(2),
            Action::output(3)
        ])]
    );
}

fn router() -> Controller<Router> {
    let ifaces = [
        "1=02:00:00:00:00:01,192.0.2.1".parse().unwrap(),
        "2=02:00:00:00:00:02,198.51.100.1".parse().unwrap(),
    ];
    let mut c = connected(Router::new(&ifaces).unwrap(), &[1, 2]);
    let routes = parse_routes("198.51.100.0/24 2 02:00:00:00:02:02").unwrap();
    c.with_app(Duration::ZERO, &mut Vec::new(), |r, ctl| {
        r.set_routes(ctl, &routes)
    })
    .unwrap();
    c
}

fn ipv4_to(dst: [u8; 4]) -> Vec<u8> {
    let mut f = frame([2, 0, 0, 0, 0, 1], A);
    f[12..14].copy_from_slice(&[8, 0]);
    f[14] = 0x45;
    f[22] = 64;
    f[30..34].copy_from_slice(&dst);
    f
}

#[test]
fn a_second_miss_of_a_flow_on_its_way_sends_no_flow_mod_and_keeps_the_order() {
    let mut c = router();
    let mut out = Vec::new();
    c.handle(
        packet_in(1, ipv4_to([198, 51, 100, 7])),
        Duration::ZERO,
        &mut out,
    );
    assert_eq!(flow_mods(&out).len(), 1);
    let b = barrier(&out);
    // The same /30 again before the barrier reply: no flow-mod, no
    // packet-out yet.
    let mut out2 = Vec::new();
    c.handle(
        packet_in(1, ipv4_to([198, 51, 100, 6])),
        Duration::ZERO,
        &mut out2,
    );
    assert!(flow_mods(&out2).is_empty() && packet_outs(&out2).is_empty());
    assert_eq!(c.counters().flows_present, 1);
    assert_eq!(c.waiting(), 2);
    let mut out3 = Vec::new();
    c.handle(
        Message::new(b, Body::BarrierReply),
        Duration::ZERO,
        &mut out3,
    );
    let po = packet_outs(&out3);
    assert_eq!(po.len(), 2);
    assert_eq!((po[0].data[33], po[1].data[33]), (7, 6));
    assert_eq!(c.counters().flows_installed, 1);
}

#[test]
fn router_arp_replies_go_back_out_of_the_ingress_port_and_are_never_flows() {
    let mut c = router();
    let mut arp = frame([0xff; 6], A);
    arp[12..14].copy_from_slice(&[8, 6]);
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp[22..28].copy_from_slice(&A);
    arp[28..32].copy_from_slice(&[192, 0, 2, 9]);
    arp[38..42].copy_from_slice(&[192, 0, 2, 1]);
    let mut out = Vec::new();
    c.handle(packet_in(1, arp), Duration::ZERO, &mut out);
    assert!(flow_mods(&out).is_empty());
    let po = packet_outs(&out);
    assert_eq!(po.len(), 1);
    // OVS skips an output to the packet's own in_port: IN_PORT it is.
    assert_eq!(
        (po[0].in_port, &po[0].actions[..]),
        (1, &[Action::output(PORT_IN_PORT)][..])
    );
    assert_eq!(po[0].data[..6], A);
    assert_eq!(po[0].data[20..22], [0, 2]);
    assert_eq!(c.flows(), 0);
}

#[test]
fn a_routed_decision_is_a_prefix_flow_and_a_route_change_deletes_it_by_cookie() {
    let mut c = router();
    let mut out = Vec::new();
    c.handle(
        packet_in(1, ipv4_to([198, 51, 100, 7])),
        Duration::ZERO,
        &mut out,
    );
    let f = flow_mods(&out)[0].clone();
    // .7 and the router's .1 part at bit 29: a /30.
    assert_eq!(
        f.matches.fields,
        vec![
            Oxm::exact(field::IN_PORT, &1u32.to_be_bytes()),
            Oxm::exact(field::ETH_TYPE, &[8, 0]),
            Oxm::masked(field::IPV4_DST, &[198, 51, 100, 4], &[255, 255, 255, 252]),
        ]
    );
    assert_eq!(
        f.instructions,
        vec![Instruction::ApplyActions(vec![
            Action::SetField(Oxm::exact(field::ETH_DST, &[2, 0, 0, 0, 2, 2])),
            Action::SetField(Oxm::exact(field::ETH_SRC, &[2, 0, 0, 0, 0, 2])),
            Action::DecNwTtl,
            Action::output(2),
        ])]
    );
    let tag = f.cookie & LOW_TAG;
    // The next hop changes: one state id revoked, its two deletes and a
    // barrier.
    let routes = parse_routes("198.51.100.0/24 2 02:00:00:00:02:03").unwrap();
    let mut out = Vec::new();
    c.with_app(Duration::ZERO, &mut out, |r, ctl| {
        r.set_routes(ctl, &routes)
    })
    .unwrap();
    let dels = flow_mods(&out);
    assert_eq!(dels.len(), 2);
    assert!(dels.iter().all(|d| d.command == FlowCommand::Delete));
    assert_eq!((dels[0].cookie, dels[1].cookie), (tag << 32, tag));
    barrier(&out);
    assert_eq!(c.flows(), 0);
    assert_eq!(c.counters().revoked_flows, 1);
}

proptest::proptest! {
    #[test]
    fn the_controller_never_panics_on_decodable_junk(
        msgs in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 8..120), 1..20),
        typ in proptest::collection::vec(0u8..25, 20),
    ) {
        let mut c = switch(1);
        let mut out = Vec::new();
        for (i, mut m) in msgs.into_iter().enumerate() {
            m[0] = 4;
            m[1] = typ[i];
            let len = m.len() as u16;
            m[2..4].copy_from_slice(&len.to_be_bytes());
            if let Ok(msg) = Message::decode(&m) {
                c.handle(msg, Duration::from_secs(i as u64), &mut out);
            }
        }
        c.tick(Duration::from_secs(100), &mut out);
    }
}

#[test]
fn the_summary_names_every_counter_once() {
    let c = Counters {
        revocations_confirmed: 2,
        revocation_us_sum: 300,
        reconnects: 1,
        ..Counters::default()
    };
    let f = summary_fields(&c, &AppCounters::default());
    let line = summary_line("l2switch", &f);
    assert!(line.starts_with("nexthop sdf: app=l2switch backend=ovs "));
    assert!(line.contains(" reconnects=1 ") && line.contains(" revocation_us_mean=150 "));
    let mut names: Vec<_> = f.iter().map(|(k, _)| *k).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), f.len());
}

/// Sends every packet from port 1 into a tunnel it adds at its first
/// packet (property `peer=x`) and deletes at its first tick.
#[derive(Debug, Default)]
struct Tunneller {
    tunnel: Option<PortId>,
}

impl App for Tunneller {
    fn name(&self) -> &str {
        "tunneller"
    }

    fn on_packet(
        &mut self,
        pkt: &mut nexthop_sdf::app::InPkt,
        ctl: &mut Control<'_>,
    ) -> Result<(), nexthop_sdf::app::AppError> {
        let t = match self.tunnel {
            Some(t) => t,
            None => {
                let t = ctl.add_port(PortKind::Tunnel).unwrap();
                ctl.set_properties(t, "peer", "x").unwrap();
                self.tunnel = Some(t);
                t
            }
        };
        pkt.mark_ingress();
        let mut out = pkt.new_out_pkt();
        out.add_destination(t);
        pkt.send(out, true).unwrap();
        Ok(())
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        if let Some(t) = self.tunnel.take() {
            ctl.del_port(t).unwrap();
        }
    }
}

/// Records what the backend asks for; fails when told to.
#[derive(Debug, Default)]
struct FakeMapper {
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    fail: bool,
}

impl PortMapper for FakeMapper {
    fn add(&mut self, port: &PortInfo) -> Result<(), String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("add {} peer={}", port.id, port.properties["peer"]));
        if self.fail {
            Err("no".into())
        } else {
            Ok(())
        }
    }

    fn remove(&mut self, id: PortId) -> Result<(), String> {
        self.log.lock().unwrap().push(format!("remove {id}"));
        Ok(())
    }
}

fn tunneller(
    fail: bool,
) -> (
    Controller<Tunneller>,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let mut c = connected(Tunneller::default(), &[1]);
    let m = FakeMapper {
        fail,
        ..FakeMapper::default()
    };
    let log = m.log.clone();
    c.set_port_mapper(Box::new(m));
    (c, log)
}

#[test]
fn a_port_the_app_adds_gets_a_switch_port_before_its_flow_and_packet_out() {
    let (mut c, log) = tunneller(false);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    assert_eq!(*log.lock().unwrap(), ["add 2 peer=x"]);
    assert_eq!(c.mapped_ports(), [2]);
    let fm = flow_mods(&out);
    assert_eq!(fm.len(), 1);
    assert_eq!(
        fm[0].instructions,
        vec![Instruction::ApplyActions(vec![Action::output(2)])]
    );
    let b = barrier(&out);
    out.clear();
    c.handle(
        Message::new(b, Body::BarrierReply),
        Duration::ZERO,
        &mut out,
    );
    assert_eq!(packet_outs(&out)[0].actions, vec![Action::output(2)]);
    assert_eq!(
        (c.counters().mapped_ports, c.counters().unmapped_ports),
        (1, 0)
    );
    // The app deletes its port: the switch's goes too.
    c.tick(Duration::from_secs(1), &mut Vec::new());
    assert_eq!(*log.lock().unwrap(), ["add 2 peer=x", "remove 2"]);
    assert!(c.mapped_ports().is_empty());
}

#[test]
fn an_unmapped_port_is_left_out_of_packet_outs_and_its_decisions_not_installed() {
    let (mut c, log) = tunneller(true);
    let mut out = Vec::new();
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    c.handle(packet_in(1, frame(B, A)), Duration::ZERO, &mut out);
    // Tried once, not again for every packet.
    assert_eq!(*log.lock().unwrap(), ["add 2 peer=x"]);
    assert!(flow_mods(&out).is_empty() && packet_outs(&out).is_empty());
    let k = c.counters();
    assert_eq!((k.mapped_ports, k.unmapped_ports), (0, 1));
    assert_eq!((k.unmapped_outputs, k.not_installed_actions), (2, 2));
    // Deleting an unmapped port asks the mapper nothing.
    c.tick(Duration::from_secs(1), &mut Vec::new());
    assert_eq!(log.lock().unwrap().len(), 1);
}
