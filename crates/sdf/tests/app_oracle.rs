//! The cache's correctness oracle at the cache level: a toy app (an L2
//! switch with flooding, a prefix router with TTL primitive and MAC
//! rewrite, control traffic, an ingress-reflecting service, and an
//! ARP-like reply that must not be cached) decides every packet; the
//! cached path (lookup → apply, or on a miss: decide → install) must give
//! the same ports and bytes as running the app on every packet, while the
//! app's state changes and it revokes what it changed.

use std::collections::HashMap;

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, NotCached, Outcome,
    Primitive, StateId, StateIds,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const PORTS: u16 = 4;
/// Frame byte the app dispatches on.
const KIND: usize = 12;
/// "TTL" and "checksum" of the router's made-up header.
const TTL: usize = 20;

struct App {
    /// Destination (byte 0) → (port, state id).
    l2: HashMap<u8, (u16, StateId)>,
    /// Destination (byte 0) not known: the id flood decisions register.
    unknown: HashMap<u8, StateId>,
    /// Route prefix (top 3 bits of byte 13) → (port, next-hop MAC byte, id).
    routes: HashMap<u8, (u16, u8, StateId)>,
    /// Prefix without a route: the id drop decisions register.
    no_route: HashMap<u8, StateId>,
}

struct Verdict {
    ports: Vec<u16>,
    controller: bool,
    frame: Vec<u8>,
}

impl App {
    /// Decide for `frame` from `in_port`: the packet's fate, and the
    /// decision as the API layer would build it.
    fn decide(&self, frame: &[u8], in_port: u16) -> Decision {
        let mut mask = Mask::new();
        let mut states = StateIds::new();
        if frame.len() < 24 {
            // Depends on the length, which cannot be marked: not cached.
            return Decision {
                mask,
                states,
                actions: Actions::drop(),
            };
        }
        // It checked the length before reading anything.
        mask.require_len(24).unwrap();
        mask.mark_bytes(KIND, 1).unwrap();
        let actions = match frame[KIND] {
            1 => {
                mask.mark_bytes(0, 1).unwrap();
                match self.l2.get(&frame[0]) {
                    Some(&(p, id)) => {
                        states.push(id);
                        Actions::output(p)
                    }
                    None => {
                        mask.mark_ingress();
                        states.push(self.unknown[&frame[0]]);
                        let ports: Vec<u16> = (0..PORTS).filter(|&p| p != in_port).collect();
                        Actions::output_set(&ports).unwrap()
                    }
                }
            }
            2 => {
                mask.mark(13 * 8, 3).unwrap();
                let prefix = frame[13] >> 5;
                match self.routes.get(&prefix) {
                    Some(&(p, mac, id)) => {
                        states.push(id);
                        let mut a = Actions::output(p);
                        a.set_bytes(0, &[0x02, mac]).unwrap();
                        a.push_primitive(Primitive::DecrementTtl {
                            ttl_at: TTL as u8,
                            checksum_at: Some(TTL as u8 + 2),
                        })
                        .unwrap();
                        a
                    }
                    None => {
                        states.push(self.no_route[&prefix]);
                        Actions::drop()
                    }
                }
            }
            3 => Actions::to_controller(),
            4 => {
                mask.mark_ingress();
                Actions::output(in_port)
            }
            _ => {
                // An ARP-like reply the app answers itself: no marks, no
                // state, not cached.
                mask.clear();
                Actions::output(0)
            }
        };
        Decision {
            mask,
            states,
            actions,
        }
    }

    fn learn(&mut self, c: &mut DecisionCache, dst: u8, port: u16) {
        if let Some((_, old)) = self.l2.remove(&dst) {
            c.removed(old);
        }
        if let Some(u) = self.unknown.remove(&dst) {
            c.removed(u);
        }
        let id = c.new_state_id().unwrap();
        self.l2.insert(dst, (port, id));
    }

    fn forget(&mut self, c: &mut DecisionCache, dst: u8) {
        if let Some((_, old)) = self.l2.remove(&dst) {
            c.removed(old);
            self.unknown.insert(dst, c.new_state_id().unwrap());
        }
    }

    fn route(&mut self, c: &mut DecisionCache, prefix: u8, port: u16, mac: u8) {
        if let Some((_, _, old)) = self.routes.remove(&prefix) {
            c.removed(old);
        }
        if let Some(n) = self.no_route.remove(&prefix) {
            c.removed(n);
        }
        let id = c.new_state_id().unwrap();
        self.routes.insert(prefix, (port, mac, id));
    }

    fn withdraw(&mut self, c: &mut DecisionCache, prefix: u8) {
        if let Some((_, _, old)) = self.routes.remove(&prefix) {
            c.removed(old);
            self.no_route.insert(prefix, c.new_state_id().unwrap());
        }
    }
}

fn run_actions(a: &Actions, frame: &[u8]) -> Verdict {
    let mut f = frame.to_vec();
    match a.apply(&mut f) {
        Outcome::Forward => Verdict {
            ports: a.ports().to_vec(),
            controller: a.controller(),
            frame: f,
        },
        Outcome::Expired | Outcome::TooShort => Verdict {
            ports: vec![],
            controller: false,
            frame: f,
        },
    }
}

fn random_frame(r: &mut impl Rng) -> Vec<u8> {
    let len = if r.gen_bool(0.05) {
        r.gen_range(0..24)
    } else {
        r.gen_range(24..80)
    };
    let mut f: Vec<u8> = (0..len).map(|_| r.gen()).collect();
    if len > KIND {
        f[0] = r.gen_range(0..6);
        f[KIND] = r.gen_range(0..6);
    }
    if len > TTL {
        f[TTL] = r.gen_range(0..4);
    }
    f
}

fn oracle_run(seed: u64, capacity: usize) -> (u64, u64) {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut c = DecisionCache::new(Config {
        capacity,
        front_slots: 256,
        rerank_every: 50,
        ..Config::default()
    })
    .unwrap();
    let mut app = App {
        l2: HashMap::new(),
        unknown: (0..6).map(|d| (d, c.new_state_id().unwrap())).collect(),
        routes: HashMap::new(),
        no_route: (0..8).map(|p| (p, c.new_state_id().unwrap())).collect(),
    };
    let (mut hits, mut app_calls) = (0u64, 0u64);
    for step in 0..5000 {
        if r.gen_bool(0.03) {
            let (dst, port) = (r.gen_range(0..6), r.gen_range(0..PORTS));
            let prefix = r.gen_range(0..8);
            match r.gen_range(0..4) {
                0 => app.learn(&mut c, dst, port),
                1 => app.forget(&mut c, dst),
                2 => app.route(&mut c, prefix, port, r.gen()),
                _ => app.withdraw(&mut c, prefix),
            }
        }
        let frame = random_frame(&mut r);
        let in_port = r.gen_range(0..PORTS);
        let want = {
            // The reference: the app on this packet, no cache.
            let d = app.decide(&frame, in_port);
            run_actions(&d.actions, &frame)
        };
        let key = HeaderKey::from_frame(&frame, in_port);
        let got = match c.lookup(&key) {
            Some(id) => {
                hits += 1;
                run_actions(c.actions(id).unwrap(), &frame)
            }
            None => {
                app_calls += 1;
                let d = app.decide(&frame, in_port);
                let v = run_actions(&d.actions, &frame);
                match c.install(&key, &d).unwrap() {
                    Installed::Cached(_) => {}
                    Installed::NotCached(NotCached::NoDependencies) => {
                        assert!(frame.len() < 24 || !(1..=4).contains(&frame[KIND]))
                    }
                    Installed::NotCached(why) => panic!("step {step}: {why:?}"),
                }
                v
            }
        };
        assert_eq!(
            got.ports, want.ports,
            "step {step} frame {frame:?} port {in_port}"
        );
        assert_eq!(got.controller, want.controller, "step {step}");
        assert_eq!(got.frame, want.frame, "step {step}");
    }
    (hits, app_calls)
}

#[test]
fn cached_path_equals_the_app_on_every_packet_while_state_changes() {
    let (mut hits, mut calls) = (0, 0);
    for seed in 0..10 {
        let (h, a) = oracle_run(seed, 1 << 16);
        hits += h;
        calls += a;
    }
    // The cache answers most packets, although a third of them (kinds 0
    // and 5, and short frames) is uncacheable by design.
    assert!(hits > calls, "hits {hits} app calls {calls}");
}

#[test]
fn cached_path_equals_the_app_with_a_tiny_cache() {
    for seed in 100..110 {
        oracle_run(seed, 8);
    }
}
