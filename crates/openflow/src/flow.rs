//! A cached decision as an OpenFlow flow: the match is exactly the marked
//! bits, the priority comes from the mark's specificity (paper §6), the
//! actions are the decision's outputs, rewrites and TTL primitive.
//!
//! Which marked bits OpenFlow 1.3 can express (offsets in the frame, an
//! untagged Ethernet header first):
//!
//! | bytes   | field     | masks                                  |
//! |---------|-----------|----------------------------------------|
//! | 0..6    | `eth_dst` | any bits                               |
//! | 6..12   | `eth_src` | any bits                               |
//! | 12..14  | `eth_type`| all 16 bits or none; not a VLAN TPID   |
//! | 23      | `ip_proto`| all 8 bits or none (IPv4 frames)       |
//! | 26..30  | `ipv4_src`| any bits (IPv4 frames)                 |
//! | 30..34  | `ipv4_dst`| any bits (IPv4 frames)                 |
//! | ingress | `in_port` | exact                                  |
//!
//! An IPv4 field adds `eth_type=0x0800` to the match when the decision did
//! not mark it (the flow then covers a subset of what the decision covers:
//! safe, the rest still misses). Likewise the ingress port: a switch never
//! sends a packet back out of the port it came in on unless the action
//! names the reserved `IN_PORT`, so a decision that outputs to ports
//! without having marked the ingress port gets the ingress port of the
//! packet that made it added to the match, and an output to that port
//! becomes `IN_PORT` (a router's hairpin route stays one). A bit anywhere else, a partial ethertype,
//! or a required length beyond the fields the switch parses anyway means
//! the decision cannot be a flow: [`Inexpressible`] says why, and the
//! backend sends the packet without installing anything.

use nexthop_sdf::{Actions, Decision, Mask, Primitive, KEY_BITS, KEY_BYTES};

use crate::codec::{field, Action, Match, Oxm, PORT_CONTROLLER, PORT_IN_PORT, PORT_MAX};

/// Why a decision cannot become a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inexpressible {
    /// A marked bit at this byte lies outside the fields OpenFlow matches.
    Bits(usize),
    /// The decision needs the frame to be at least this long, which no
    /// match field implies.
    Length(usize),
    /// A rewrite that does not cover whole `eth_dst` / `eth_src` /
    /// `ipv4_src` / `ipv4_dst` fields.
    Rewrite,
    /// A primitive other than the IPv4 TTL decrement of an untagged frame.
    Primitive,
    /// An output port OpenFlow cannot name.
    Port,
    /// More state ids than a cookie carries (two).
    States(usize),
}

impl Inexpressible {
    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Inexpressible::Bits(_) => "bits",
            Inexpressible::Length(_) => "length",
            Inexpressible::Rewrite => "rewrite",
            Inexpressible::Primitive => "primitive",
            Inexpressible::Port => "port",
            Inexpressible::States(_) => "states",
        }
    }
}

/// A decision as a flow: priority, match, actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Priority (1 ..= 4098; 0 is the table-miss flow's).
    pub priority: u16,
    /// The match.
    pub matches: Match,
    /// The actions.
    pub actions: Vec<Action>,
}

const ETH_TYPE_IPV4: [u8; 2] = [0x08, 0x00];

/// The priority of a mask (paper §6's TCAM ordering): masks whose first
/// bit is marked rank above those that start with don't-care bits; among
/// the first, the longer the leading run of marked bits the higher; among
/// the second, the shorter the leading run of don't-care bits the higher.
/// A marked ingress port breaks ties upwards. Range 1 ..= 4098.
pub fn priority(mask: &Mask) -> u16 {
    let lead = |marked: bool| {
        (0..KEY_BITS)
            .take_while(|&b| mask.is_marked(b) == marked)
            .count()
    };
    let spec = if mask.is_marked(0) {
        1024 + lead(true)
    } else {
        // An empty mask has KEY_BITS leading don't-cares: the lowest.
        KEY_BITS - lead(false).min(KEY_BITS)
    };
    // spec <= 2048, so this fits in u16.
    (1 + 2 * spec + usize::from(mask.ingress_marked())) as u16
}

/// The field a byte range maps to: (OXM field, start, len, IPv4 only,
/// maskable).
const FIELDS: [(u8, usize, usize, bool, bool); 6] = [
    (field::ETH_DST, 0, 6, false, true),
    (field::ETH_SRC, 6, 6, false, true),
    (field::ETH_TYPE, 12, 2, false, false),
    (field::IP_PROTO, 23, 1, true, false),
    (field::IPV4_SRC, 26, 4, true, true),
    (field::IPV4_DST, 30, 4, true, true),
];

/// Translate `d`, decided on `frame` received on OpenFlow port `in_port`,
/// into a flow.
pub fn translate(frame: &[u8], in_port: u32, d: &Decision) -> Result<FlowSpec, Inexpressible> {
    let mb = d.mask.bytes();
    let mut key = [0u8; KEY_BYTES];
    let n = frame.len().min(KEY_BYTES);
    key[..n].copy_from_slice(&frame[..n]);
    let ipv4 = frame.len() >= 34 && key[12..14] == ETH_TYPE_IPV4;

    // Every marked byte must lie in a field this frame lets us express.
    let mut covered = [false; KEY_BYTES];
    let mut fields = Vec::new();
    let mut uses_ip = false;
    if d.mask.ingress_marked() || !d.actions.ports().is_empty() {
        fields.push(Oxm::exact(field::IN_PORT, &in_port.to_be_bytes()));
    }
    for (f, at, len, ip_only, maskable) in FIELDS {
        let m = &mb[at..at + len];
        if m.iter().all(|&b| b == 0) {
            continue;
        }
        if ip_only && !ipv4 {
            continue;
        }
        let v = &key[at..at + len];
        if m.iter().all(|&b| b == 0xff) {
            if f == field::ETH_TYPE && matches!(v, [0x81, 0x00] | [0x88, 0xa8]) {
                // A VLAN TPID is not an OpenFlow eth_type.
                continue;
            }
            fields.push(Oxm::exact(f, v));
        } else if maskable {
            fields.push(Oxm::masked(f, v, m));
        } else {
            continue;
        }
        uses_ip |= ip_only;
        covered[at..at + len].fill(true);
    }
    if let Some(i) = (0..KEY_BYTES).find(|&i| mb[i] != 0 && !covered[i]) {
        return Err(Inexpressible::Bits(i));
    }

    // Actions: rewrites as set-fields, the TTL primitive, outputs.
    let mut actions = Vec::new();
    uses_ip |= rewrites(&d.actions, ipv4, &mut actions)?;
    for p in d.actions.primitives() {
        match *p {
            Primitive::DecrementTtl {
                ttl_at: 22,
                checksum_at: Some(24),
            } if ipv4 => {
                actions.push(Action::DecNwTtl);
                uses_ip = true;
            }
            _ => return Err(Inexpressible::Primitive),
        }
    }
    for &p in d.actions.ports() {
        let p = u32::from(p);
        if p == 0 || p > PORT_MAX {
            return Err(Inexpressible::Port);
        }
        actions.push(Action::output(out_port(p, in_port)));
    }
    if d.actions.controller() {
        actions.push(Action::output(PORT_CONTROLLER));
    }

    if uses_ip && !covered[12] {
        fields.push(Oxm::exact(field::ETH_TYPE, &ETH_TYPE_IPV4));
    }
    // The switch parses a frame's Ethernet header (and an IPv4 header for
    // IPv4 fields) before it matches: a required length up to that is
    // implied, beyond it is not.
    let parsed = if uses_ip { 34 } else { 14 };
    let need = d.mask.min_len();
    if need > parsed.max(last_marked(&mb)) {
        return Err(Inexpressible::Length(need));
    }
    // OXM order: in_port, eth_dst, eth_src, eth_type, then IP fields (the
    // prerequisite before the fields that need it).
    fields.sort_by_key(|o| {
        (
            o.field != field::IN_PORT,
            o.field > field::ETH_TYPE,
            o.field,
        )
    });
    if d.states.len() > 2 {
        return Err(Inexpressible::States(d.states.len()));
    }
    Ok(FlowSpec {
        priority: priority(&d.mask),
        matches: Match { fields },
        actions,
    })
}

/// The output action's port for port `p` of a packet that came in on
/// `in_port`: the reserved `IN_PORT` for the ingress port itself (module
/// docs).
pub fn out_port(p: u32, in_port: u32) -> u32 {
    if p == in_port {
        PORT_IN_PORT
    } else {
        p
    }
}

fn last_marked(mb: &[u8; KEY_BYTES]) -> usize {
    mb.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// Rewrites as set-field actions; whether an IPv4 field was set.
fn rewrites(a: &Actions, ipv4: bool, out: &mut Vec<Action>) -> Result<bool, Inexpressible> {
    let mut uses_ip = false;
    for r in a.rewrites() {
        let at = usize::from(r.at);
        let end = at + r.bytes.len();
        let mut pos = at;
        while pos < end {
            let Some(&(f, fat, flen, ip_only, _)) =
                FIELDS.iter().find(|&&(f, fat, flen, ip, _)| {
                    fat == pos
                        && pos + flen <= end
                        && (!ip || ipv4)
                        && matches!(
                            f,
                            field::ETH_DST | field::ETH_SRC | field::IPV4_SRC | field::IPV4_DST
                        )
                })
            else {
                return Err(Inexpressible::Rewrite);
            };
            let v = &r.bytes[fat - at..fat - at + flen];
            out.push(Action::SetField(Oxm::exact(f, v)));
            uses_ip |= ip_only;
            pos += flen;
        }
    }
    Ok(uses_ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_sdf::{DecisionCache, StateIds};

    fn ipv4_frame() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ETH_TYPE_IPV4);
        f[14] = 0x45;
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 1, 2, 3]);
        f
    }

    fn ids(n: usize) -> StateIds {
        let mut c = DecisionCache::new(Default::default()).unwrap();
        (0..n).map(|_| c.new_state_id().unwrap()).collect()
    }

    fn decision(mask: Mask, actions: Actions) -> Decision {
        Decision {
            mask,
            states: ids(1),
            actions,
        }
    }

    #[test]
    fn l2_decision_matches_exactly_its_marked_macs_and_port() {
        let mut m = Mask::new();
        m.mark_bytes(0, 12).unwrap();
        m.mark_ingress();
        let f = translate(&ipv4_frame(), 3, &decision(m, Actions::output(2))).unwrap();
        assert_eq!(
            f.matches.fields,
            vec![
                Oxm::exact(field::IN_PORT, &3u32.to_be_bytes()),
                Oxm::exact(field::ETH_DST, &[2, 0, 0, 0, 0, 2]),
                Oxm::exact(field::ETH_SRC, &[2, 0, 0, 0, 0, 1]),
            ]
        );
        assert_eq!(f.actions, vec![Action::output(2)]);
    }

    #[test]
    fn a_prefix_of_ipv4_dst_is_a_masked_field_with_the_ethertype_added() {
        let mut m = Mask::new();
        m.mark(30 * 8, 12).unwrap();
        let f = translate(&ipv4_frame(), 1, &decision(m, Actions::output(4))).unwrap();
        assert_eq!(
            f.matches.fields,
            vec![
                Oxm::exact(field::IN_PORT, &1u32.to_be_bytes()),
                Oxm::exact(field::ETH_TYPE, &ETH_TYPE_IPV4),
                Oxm::masked(field::IPV4_DST, &[10, 1, 0, 0], &[0xff, 0xf0, 0, 0]),
            ]
        );
    }

    #[test]
    fn outputs_without_a_marked_ingress_match_it_and_a_hairpin_is_in_port() {
        let mut m = Mask::new();
        m.mark_bytes(30, 4).unwrap();
        let mut a = Actions::output(3);
        a.add_port(1).unwrap();
        let f = translate(&ipv4_frame(), 3, &decision(m.clone(), a)).unwrap();
        assert_eq!(
            f.matches.fields[0],
            Oxm::exact(field::IN_PORT, &3u32.to_be_bytes())
        );
        assert_eq!(
            f.actions,
            vec![Action::output(1), Action::output(PORT_IN_PORT)]
        );
        // The priority is still the mask's.
        assert_eq!(f.priority, priority(&m));
        // A drop does not depend on the ingress port.
        let f = translate(&ipv4_frame(), 3, &decision(m, Actions::drop())).unwrap();
        assert!(f.matches.in_port().is_none());
    }

    #[test]
    fn bits_outside_the_fields_are_not_expressible() {
        let mut m = Mask::new();
        m.mark_bytes(40, 2).unwrap();
        let e = translate(&ipv4_frame(), 1, &decision(m, Actions::output(4)));
        assert_eq!(e, Err(Inexpressible::Bits(40)));
        // A partial ethertype, or IPv4 bytes of a non-IPv4 frame.
        let mut m = Mask::new();
        m.mark(12 * 8, 4).unwrap();
        let e = translate(&ipv4_frame(), 1, &decision(m, Actions::output(4)));
        assert_eq!(e, Err(Inexpressible::Bits(12)));
        let mut arp = ipv4_frame();
        arp[12..14].copy_from_slice(&[8, 6]);
        let mut m = Mask::new();
        m.mark_bytes(30, 4).unwrap();
        let e = translate(&arp, 1, &decision(m, Actions::output(4)));
        assert_eq!(e, Err(Inexpressible::Bits(30)));
    }

    #[test]
    fn a_required_length_past_the_parsed_headers_is_not_expressible() {
        let mut m = Mask::new();
        m.mark_bytes(0, 6).unwrap();
        m.require_len(14).unwrap();
        assert!(translate(&ipv4_frame(), 1, &decision(m.clone(), Actions::output(2))).is_ok());
        m.require_len(40).unwrap();
        let e = translate(&ipv4_frame(), 1, &decision(m, Actions::output(2)));
        assert_eq!(e, Err(Inexpressible::Length(40)));
    }

    #[test]
    fn router_rewrites_and_ttl_become_set_fields_and_dec_ttl() {
        let f = ipv4_frame();
        let mut a = Actions::output(7);
        a.set_bytes(0, &[2, 0, 0, 0, 0, 9]).unwrap();
        a.set_bytes(6, &[2, 0, 0, 0, 0, 8]).unwrap();
        a.push_primitive(Primitive::ip_ttl_for(&f).unwrap())
            .unwrap();
        let mut m = Mask::new();
        m.mark_bytes(30, 4).unwrap();
        let fs = translate(&f, 1, &decision(m, a)).unwrap();
        assert!(fs.actions.contains(&Action::DecNwTtl));
        assert!(fs.actions.contains(&Action::SetField(Oxm::exact(
            field::ETH_DST,
            &[2, 0, 0, 0, 0, 9]
        ))));
        assert_eq!(fs.actions.last(), Some(&Action::output(7)));
        // A rewrite of half a MAC is not a set-field.
        let mut a = Actions::output(7);
        a.set_bytes(2, &[1, 2]).unwrap();
        let e = translate(&f, 1, &decision(Mask::new(), a));
        assert_eq!(e, Err(Inexpressible::Rewrite));
    }

    #[test]
    fn more_than_two_state_ids_do_not_fit_a_cookie() {
        let mut m = Mask::new();
        m.mark_bytes(0, 6).unwrap();
        let d = Decision {
            mask: m,
            states: ids(3),
            actions: Actions::output(1),
        };
        assert_eq!(
            translate(&ipv4_frame(), 1, &d),
            Err(Inexpressible::States(3))
        );
    }

    #[test]
    fn longer_leading_marks_rank_higher_and_leading_dont_cares_lower() {
        let mk = |pos: usize, len: usize| {
            let mut m = Mask::new();
            m.mark(pos, len).unwrap();
            m
        };
        let dst48 = priority(&mk(0, 48));
        let dst24 = priority(&mk(0, 24));
        let src = priority(&mk(48, 48));
        let ip = priority(&mk(30 * 8, 32));
        assert!(dst48 > dst24 && dst24 > src && src > ip && ip >= 1);
        let mut with_port = mk(0, 48);
        with_port.mark_ingress();
        assert_eq!(priority(&with_port), dst48 + 1);
        let mut all = Mask::new();
        all.mark(0, KEY_BITS).unwrap();
        all.mark_ingress();
        assert_eq!(priority(&all), 4098);
        assert_eq!(priority(&Mask::new()), 1);
    }
}
