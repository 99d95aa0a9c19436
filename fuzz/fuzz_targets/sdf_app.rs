//! Untrusted frames and untrusted decisions arriving from an app through
//! the SDF app API: the input is cut into records `[n, 3n op bytes, port,
//! len, frame bytes…]`; each record's ops become the script the app runs
//! if the frame misses the cache (marks, unmarks and reads anywhere,
//! out-packets, destinations on any port, registrations of live, removed
//! and fresh ids, rewrites and primitives anywhere, sends after the final
//! one, errors, proactive pushes), and the frame goes through a caching
//! `Switch`. Nothing may panic, frames are only sent to the switch's
//! ports, and the caps hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_sdf::app::{App, AppError, Control, InPkt, OutPkt, Ports, Switch};
use nexthop_sdf::{Config, Primitive, StateId};

#[derive(Default)]
struct Scripted {
    ops: Vec<[u8; 3]>,
    states: Vec<StateId>,
}

impl App for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        let mut out: Option<OutPkt> = None;
        for [op, x, y] in std::mem::take(&mut self.ops) {
            let (x, y) = (usize::from(x), usize::from(y));
            match op % 16 {
                0 => drop(pkt.mark(x * 4, y)),
                1 => drop(pkt.unmark(x * 4, y)),
                2 => drop(pkt.mark_ingress()),
                3 => pkt.clear(),
                4 => out = Some(pkt.new_out_pkt()),
                5 => out.get_or_insert_with(|| pkt.new_out_pkt()).add_destination(x as u16 % 8),
                6 => {
                    if let Ok(id) = ctl.new_state_id() {
                        self.states.push(id);
                    }
                    if let Some(&id) = self.states.get(y % self.states.len().max(1)) {
                        out.get_or_insert_with(|| pkt.new_out_pkt()).register(id);
                    }
                }
                7 => drop(out.get_or_insert_with(|| pkt.new_out_pkt()).set_bytes(x, &[y as u8; 3])),
                8 => drop(out.get_or_insert_with(|| pkt.new_out_pkt()).push_primitive(
                    Primitive::DecrementTtl { ttl_at: x as u8, checksum_at: (y & 1 == 0).then_some(y as u8) },
                )),
                9 => {
                    if let Some(o) = out.take() {
                        let _ = pkt.send(o, y & 1 == 0);
                    }
                }
                10 => {
                    if !self.states.is_empty() {
                        let id = self.states.remove(x % self.states.len());
                        ctl.removed(id);
                    }
                }
                11 => {
                    let mut o = OutPkt::raw(vec![y as u8; x]);
                    o.add_destination(y as u16 % 8);
                    let _ = pkt.send(o, false);
                }
                12 => return Err(AppError("scripted error".into())),
                13 => drop(pkt.require_len(x)),
                14 => drop(pkt.field(x * 4, y % 80)),
                _ => {
                    let mut p = ctl.new_in_pkt(x as u16 % 8, vec![y as u8; x]);
                    let _ = p.mark(0, y);
                    let mut o = p.new_out_pkt();
                    o.add_destination(y as u16 % 8);
                    let _ = p.send(o, true);
                    let _ = ctl.push(p);
                }
            }
        }
        if let Some(o) = out {
            let _ = pkt.send(o, true);
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let cfg = Config { capacity: 32, front_slots: 16, max_masks: 8, max_state_ids: 64, ..Config::default() };
    let ports = [0u16, 1, 2, 3, 4, 5];
    let mut sw = Switch::new(Scripted::default(), cfg, Ports::physical(&ports), true).expect("valid config");
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n % 16);
        if tail.len() < 3 * n + 2 {
            break;
        }
        let ops: Vec<[u8; 3]> = tail[..3 * n].chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        let (port, len) = (tail[3 * n], usize::from(tail[3 * n + 1]));
        let body = &tail[3 * n + 2..];
        let frame = &body[..len.min(body.len())];
        rest = &body[frame.len()..];
        set_ops(&mut sw, ops);
        for e in sw.process(u16::from(port % 8), frame) {
            assert!(e.ports.iter().all(|p| ports.contains(p)), "sent to a port the switch lacks");
        }
        let s = sw.stats();
        assert!(s.entries <= 32 && s.masks <= 8 && s.state_ids <= 64);
    }
});

fn set_ops(sw: &mut Switch<Scripted>, ops: Vec<[u8; 3]>) {
    sw.app_mut().ops = ops;
}
